import { run } from '../../sim/main.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI in this process: what `npm run sim -- ...args` does, minus the process. */
export async function simInProcess(args: string[]): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await run(args, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t), isTTY: false },
  });
  return { code, stdout, stderr };
}
