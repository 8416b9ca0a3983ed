/**
 * The package as a user gets it: `npm pack` on a checkout without `dist/` (as a fresh clone is),
 * the tarball unpacked into a scratch project's node_modules, then every `exports` subpath
 * imported and required there, and every TypeScript sample of README.md and docs/*.md
 * type-checked against it, under moduleResolution node16 and bundler, with ioredis 5 and 6.
 *
 * Offline: the scratch project's other packages are symlinks into this repository's node_modules
 * (installed by `npm ci`), and only the ones the packed package.json declares or the samples import.
 */
import { execFile } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { extractSamples, SAMPLE_CONTEXT } from './samples.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const bin = (name: string) => join(root, 'node_modules/.bin', name);

/** What a fresh clone has that the build and the tarball read. */
const CHECKOUT = [
  'package.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'README.md',
  'LICENSE',
  'src',
  'lua',
  // The simulator is built into dist/sim and its examples ship (the `tokenlease sim` bin).
  'sim',
];
/** Packages the samples import besides tokenlease and its dependencies. */
const SAMPLE_DEPS = [
  'express',
  'fastify',
  'prom-client',
  '@opentelemetry/api',
  '@types/express',
  '@types/node',
];

let work: string;
let tarball: string;
let manifest: { exports: Record<string, unknown>; dependencies: Record<string, string> };

/** A scratch project with the unpacked tarball and `ioredis` pointing at the given installed package. */
function scratch(name: string, ioredisDir: string): string {
  const dir = join(work, name);
  const modules = join(dir, 'node_modules');
  cpSync(join(work, 'unpacked/package'), join(modules, 'tokenlease'), { recursive: true });
  for (const dep of [...Object.keys(manifest.dependencies), ...SAMPLE_DEPS]) {
    // A scoped package (`@lukeed/ms`, `@types/node`) lives in its scope's folder.
    mkdirSync(dirname(join(modules, dep)), { recursive: true });
    symlinkSync(join(root, 'node_modules', dep), join(modules, dep), 'dir');
  }
  symlinkSync(join(root, 'node_modules', ioredisDir), join(modules, 'ioredis'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }));
  return dir;
}

/**
 * Compiles one TypeScript file of a scratch project with tsc into out/ and runs the result with
 * node; resolves to what it printed. `timeout` also proves the program exits by itself.
 */
async function compileAndRun(dir: string, file: string, module: string, env = process.env): Promise<string> {
  const compilerOptions = { module, target: 'ES2022', strict: true, types: ['node'], outDir: 'out' };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: [file] }));
  await run(bin('tsc'), ['-p', 'tsconfig.json'], { cwd: dir });
  const output = join('out', file.replace(/\.cts$/, '.cjs').replace(/\.ts$/, '.js'));
  const { stdout } = await run(process.execPath, [output], { cwd: dir, env, timeout: 10_000 });
  return stdout;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'tokenlease-pack-'));
  const checkout = join(work, 'checkout');
  for (const entry of CHECKOUT) cpSync(join(root, entry), join(checkout, entry), { recursive: true });
  symlinkSync(join(root, 'node_modules'), join(checkout, 'node_modules'), 'dir');
  // No --ignore-scripts: the tarball must get dist/ from the package's own prepack.
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], { cwd: checkout });
  // The JSON report is the last thing npm prints (lifecycle scripts may print before it).
  const report = JSON.parse(stdout.slice(stdout.lastIndexOf('\n[') + 1)) as { filename: string }[];
  tarball = join(work, report[0]!.filename);
  mkdirSync(join(work, 'unpacked'));
  await run('tar', ['xzf', tarball, '-C', join(work, 'unpacked')]);
  manifest = JSON.parse(readFileSync(join(work, 'unpacked/package/package.json'), 'utf8'));
}, 120_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the packed package', () => {
  it('ships dist/ built by prepack, the Lua scripts, the LICENSE, and the sources its maps point at', () => {
    const pkg = join(work, 'unpacked/package');
    const files = readdirSync(pkg, { recursive: true }).map(String);
    for (const f of [
      'dist/index.js',
      'dist/index.d.ts',
      'lua/token_bucket_acquire.lua',
      'LICENSE',
      'README.md',
    ]) {
      expect(files, `the tarball has ${f}`).toContain(f);
    }
    for (const map of files.filter((f) => f.endsWith('.map'))) {
      const { sources } = JSON.parse(readFileSync(join(pkg, map), 'utf8')) as { sources: string[] };
      for (const source of sources) {
        expect(files, `${map} points at ${source}, which must ship`).toContain(join(dirname(map), source));
      }
    }
  });

  it('runs `npx tokenlease sim --plans plans.yaml --traffic access.log --out report.html` where only the tarball is installed', async () => {
    const dir = join(work, 'sim-user');
    mkdirSync(dir);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'sim-user', private: true }));
    // A real install: npm links the bin into node_modules/.bin, as for any user.
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: dir });
    // The user's own files; here the examples the package ships.
    cpSync(join(dir, 'node_modules/tokenlease/sim/examples/plans.yaml'), join(dir, 'plans.yaml'));
    cpSync(join(dir, 'node_modules/tokenlease/sim/examples/access.log'), join(dir, 'access.log'));
    const { stdout, stderr } = await run(
      'npx',
      [
        '--no-install',
        'tokenlease',
        'sim',
        '--plans',
        'plans.yaml',
        '--traffic',
        'access.log',
        '--out',
        'report.html',
      ],
      { cwd: dir },
    );
    expect(stdout, 'the table names the replayed log').toMatch(
      /^access\.log\s+4 \(log\)\s+log\s+log\s+1669\s/m,
    );
    expect(stderr).toMatch(/HTML report: report\.html/);
    const html = readFileSync(join(dir, 'report.html'), 'utf8');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html, 'the run was on the plans file').toMatch(/under plans\.yaml/);
    expect(html).toMatch(/tokenlease sim --plans plans\.yaml --traffic access\.log --out report\.html/);
  }, 120_000);

  it('imports every exports subpath as ESM and with require() from a project that installed it', async () => {
    const dir = scratch('imports', 'ioredis');
    const subpaths = Object.keys(manifest.exports)
      .filter((p) => p !== './package.json')
      .map((p) => p.replace(/^\./, 'tokenlease'));
    expect(subpaths, 'the entry points').toEqual([
      'tokenlease',
      'tokenlease/http',
      'tokenlease/express',
      'tokenlease/fastify',
      'tokenlease/prometheus',
      'tokenlease/opentelemetry',
    ]);
    const esm = `for (const s of ${JSON.stringify(subpaths)}) { const m = await import(s); console.log(s, Object.keys(m).length); }`;
    const cjs = `for (const s of ${JSON.stringify(subpaths)}) console.log(s, Object.keys(require(s)).length);`;
    const viaImport = await run(process.execPath, ['--input-type=module', '-e', esm], { cwd: dir });
    const viaRequire = await run(process.execPath, ['--input-type=commonjs', '-e', cjs], { cwd: dir });
    for (const out of [viaImport.stdout, viaRequire.stdout]) {
      const lines = out.trim().split('\n');
      expect(
        lines.map((l) => l.split(' ')[0]),
        'every subpath loaded',
      ).toEqual(subpaths);
      for (const line of lines)
        expect(Number(line.split(' ')[1]), `${line}: exports something`).toBeGreaterThan(0);
    }
    expect(viaRequire.stderr, 'require() of the ES module loads without a warning').toBe('');
  });

  it('type-checks and runs a CommonJS TypeScript file that imports it (module nodenext)', async () => {
    const dir = scratch('cjs', 'ioredis');
    writeFileSync(
      join(dir, 'main.cts'),
      "import { Limiter } from 'tokenlease';\n" +
        "const limiter = new Limiter({ policies: { p: { algorithm: 'token-bucket', rate: 1 } } });\n" +
        "limiter.consume('p', 'k').then(async (d) => { console.log(d.allowed); await limiter.close(); });\n",
    );
    const stdout = await compileAndRun(dir, 'main.cts', 'nodenext');
    expect(stdout.trim(), 'the CommonJS build ran').toBe('true');
  });

  const samples = extractSamples(root);
  it('has TypeScript samples in README.md and docs/ to check', () => {
    expect(samples.filter((s) => s.doc === 'README.md').length, 'README samples').toBeGreaterThanOrEqual(6);
    expect(new Set(samples.map((s) => s.doc)).size, 'documents with samples').toBeGreaterThanOrEqual(5);
  });

  describe.each([
    ['ioredis 5', 'ioredis'],
    ['ioredis 6', 'ioredis6'],
  ])('every TypeScript sample type-checks against it with %s', (name, ioredisDir) => {
    let dir: string;
    beforeAll(() => {
      dir = scratch(`samples-${ioredisDir}`, ioredisDir);
      mkdirSync(join(dir, 'samples'));
      writeFileSync(join(dir, 'samples/context.d.ts'), SAMPLE_CONTEXT);
      for (const s of samples) writeFileSync(join(dir, 'samples', s.file), s.code);
    });

    it.each([
      ['node16', { module: 'node16', moduleResolution: 'node16' }],
      ['bundler', { module: 'esnext', moduleResolution: 'bundler' }],
    ])(`under moduleResolution %s (${name})`, async (resolution, options) => {
      const config = `tsconfig.${resolution}.json`;
      const compilerOptions = { ...options, target: 'ES2022', strict: true, noEmit: true, types: ['node'] };
      writeFileSync(join(dir, config), JSON.stringify({ compilerOptions, include: ['samples'] }));
      const result = await run(bin('tsc'), ['-p', config], { cwd: dir }).catch((err) => err);
      expect(
        `${result.stdout ?? ''}${result.stderr ?? ''}`,
        'tsc output (file names are doc-sampleN.ts)',
      ).toBe('');
    });
  });

  it("runs README's first sample against Redis, and it exits by itself", async () => {
    const dir = scratch('use', 'ioredis');
    const use = samples.find((s) => s.doc === 'README.md')!;
    writeFileSync(join(dir, 'use.ts'), use.code);
    const stdout = await compileAndRun(dir, 'use.ts', 'node16', {
      ...process.env,
      REDIS_URL: inject('redisUrl'),
    });
    expect(stdout, 'the sample printed its decision').toMatch(/allowed: true/);
  });

  it('is clean under publint and arethetypeswrong (ESM-only profile: require() is Node’s, tested above)', async () => {
    await run(bin('publint'), ['--strict', '--pack', 'false', join(work, 'unpacked/package')]);
    // attw's exit status applies the profile; its JSON lists the ignored resolutions too.
    const attw = await run(bin('attw'), [tarball, '--profile', 'esm-only', '--format', 'ascii']).then(
      () => '',
      (err: { stdout: string }) => err.stdout,
    );
    expect(attw, 'arethetypeswrong problems').toBe('');
  });
});
