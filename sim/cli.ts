import { runProcess } from './main.js';

// `npm run sim`: see `npm run sim -- --help`. The installed package runs the same through sim/bin.ts.
runProcess(process.argv.slice(2), 'npm run sim --');
