// Bundles the playground's JavaScript (dist/main.js, dist/worker.js) and
// writes the repository's examples into dist/examples.json. The wasm module
// (dist/mlpl.wasm) comes from scripts/wasm-build.sh, which runs this last.
import { build } from 'esbuild';
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
mkdirSync(dist, { recursive: true });
const common = { bundle: true, format: 'esm', minify: true, target: 'es2022', logLevel: 'warning' };
await build({ ...common, entryPoints: [join(here, 'src/main.js')], outfile: join(dist, 'main.js') });
await build({ ...common, entryPoints: [join(here, 'src/worker.js')], outfile: join(dist, 'worker.js') });

const examplesDir = join(here, '../../examples');
const examples = {};
for (const f of readdirSync(examplesDir).filter((f) => f.endsWith('.mlpl'))) {
  examples[f] = readFileSync(join(examplesDir, f), 'utf8');
}
writeFileSync(join(dist, 'examples.json'), JSON.stringify(examples));
console.error(`playground: bundled into ${dist}`);
