#!/usr/bin/env node
import { runProcess } from './main.js';

// `tokenlease sim …` from the installed package (package.json "bin").
const [command, ...args] = process.argv.slice(2);
if (command === 'sim') {
  runProcess(args, 'tokenlease sim');
} else {
  const help = command === undefined || command === '--help' || command === '-h';
  (help ? process.stdout : process.stderr).write(
    `${help ? '' : `tokenlease: unknown command ${JSON.stringify(command)}\n`}Usage: tokenlease sim [options]   (tokenlease sim --help for the options)\n`,
  );
  process.exitCode = help ? 0 : 2;
}
