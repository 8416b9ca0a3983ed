import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Builds the simulator into the shipped package as `dist/sim/`, next to the library it runs on.
 *
 * In the repository sim/ imports the library as `../src/...`; in the package that library is
 * `dist/` itself, so the compiled `dist/sim/*.js` must import `../...`. tsc cannot rewrite paths,
 * so it compiles into a staging directory and the sim files are moved with that one prefix
 * rewritten; the staging copy of the library is dropped (the package keeps exactly one).
 */
const root = join(import.meta.dirname, '..');
const staging = join(root, 'dist/.sim-staging');
const out = join(root, 'dist/sim');

rmSync(staging, { recursive: true, force: true });
rmSync(out, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'sim/tsconfig.build.json')],
  {
    stdio: 'inherit',
  },
);
for (const entry of readdirSync(join(staging, 'sim'), { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !entry.name.endsWith('.js')) continue;
  const from = join(entry.parentPath, entry.name);
  const to = join(out, from.slice(join(staging, 'sim').length));
  const code = readFileSync(from, 'utf8').replace(/(from\s+|import\()(["'])\.\.\/src\//g, '$1$2../');
  if (code.includes('../src/')) throw new Error(`${from}: an import of ../src/ was not rewritten`);
  mkdirSync(dirname(to), { recursive: true });
  writeFileSync(to, code);
}
rmSync(staging, { recursive: true, force: true });
chmodSync(join(out, 'bin.js'), 0o755);
