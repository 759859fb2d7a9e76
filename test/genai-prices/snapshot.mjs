// Writes agentmeter's embedded price snapshot (pricing/genai-prices.json, `make prices`)
// from the installed @pydantic/genai-prices: every provider's routing (provider_match,
// model_match, fallback_model_providers) and every model's id, match and prices, with the
// package's version and publication date (asked of the npm registry; pass YYYY-MM-DD to
// give it instead). Usage: node snapshot.mjs [published-date] > out.
import { waitForUpdate } from '@pydantic/genai-prices';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('./node_modules/@pydantic/genai-prices/package.json', import.meta.url), 'utf8'));
const date = process.argv[2] ||
  String(JSON.parse(execFileSync('npm', ['view', pkg.name, 'time', '--json'], { encoding: 'utf8' }))[pkg.version] || '').slice(0, 10);
if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) {
  console.error(`no publication date for ${pkg.name}@${pkg.version}; pass it as YYYY-MM-DD`);
  process.exit(2);
}
const providers = (await waitForUpdate()).map((p) => {
  const out = { id: p.id };
  for (const k of ['provider_match', 'model_match', 'fallback_model_providers']) if (p[k] !== undefined) out[k] = p[k];
  out.models = p.models.map((m) => ({ id: m.id, match: m.match, prices: m.prices }));
  return out;
});
// One model per line: a dataset update reads as a diff of the models that changed.
const lines = [];
lines.push('{"dataset": ' + JSON.stringify(pkg.name) + ', "version": ' + JSON.stringify(pkg.version) + ', "date": ' + JSON.stringify(date) + ',');
lines.push(' "license": "MIT, https://github.com/pydantic/genai-prices",');
lines.push(' "providers": [');
providers.forEach((p, i) => {
  const { models, ...head } = p;
  const h = JSON.stringify(head);
  lines.push('  ' + h.slice(0, -1) + ', "models": [');
  models.forEach((m, j) => lines.push('   ' + JSON.stringify(m) + (j < models.length - 1 ? ',' : '')));
  lines.push('  ]}' + (i < providers.length - 1 ? ',' : ''));
});
lines.push(' ]}');
process.stdout.write(lines.join('\n') + '\n');
