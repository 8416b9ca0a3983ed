/**
 * The adapter bench's server, one process per (framework, variant):
 * `tsx bench/adapter-server.ts <framework> <variant>`, the apps of bench/adapter-apps.ts (which says
 * what each variant is). Same IPC protocol as http-server.ts.
 */
import { adapterApp, FRAMEWORKS, type Framework, VARIANTS, type Variant } from './adapter-apps.js';
import { serveOverIpc } from './server-ipc.js';

const [framework = 'node', variant = 'none'] = process.argv.slice(2) as [Framework, Variant];
if (!FRAMEWORKS.includes(framework)) throw new Error(`unknown framework ${framework}`);
if (!VARIANTS.includes(variant)) throw new Error(`unknown variant ${variant}`);
const app = await adapterApp(framework, variant);

serveOverIpc(
  app.server,
  () => ({ refused: 0, errors: 0 }),
  () => app.close(),
);
