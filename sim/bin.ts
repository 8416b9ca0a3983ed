#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { runProcess } from './main.js';

/** The package's version: package.json is two levels up from dist/sim/bin.js, one from sim/bin.ts. */
function version(): string {
  for (const path of ['../../package.json', '../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'tokenlease' && pkg.version) return pkg.version;
    } catch {
      // not this one
    }
  }
  return 'unknown';
}

// `tokenlease sim …` from the installed package (package.json "bin").
const [command, ...args] = process.argv.slice(2);
if (command === 'sim') {
  runProcess(args, 'tokenlease sim');
} else if (command === '--version' || command === '-v') {
  process.stdout.write(`${version()}\n`);
} else {
  const help = command === undefined || command === '--help' || command === '-h';
  (help ? process.stdout : process.stderr).write(
    `${help ? '' : `tokenlease: unknown command ${JSON.stringify(command)}\n`}Usage: tokenlease sim [options]   (tokenlease sim --help for the options; tokenlease --version)\n`,
  );
  process.exitCode = help ? 0 : 2;
}
