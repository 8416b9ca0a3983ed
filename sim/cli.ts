import { run } from './main.js';

// `npm run sim`: see `npm run sim -- --help`.
run(process.argv.slice(2), process).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // A bug, not a usage problem: the stack is what is needed to fix it.
    process.stderr.write(`sim: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
