// Prices each case on stdin ({provider, model, timestamp, usage}[]) with
// @pydantic/genai-prices and prints the total (or null when it does not know the model).
// Run by pricing/crosscheck_test.go; usage keys are genai-prices' own
// (input_tokens includes cache reads and writes, cache_write_tokens includes 1-hour writes).
// `node crosscheck.mjs dump <provider>...` prints those providers' data instead, in the
// data.json shape, for the loader test.
import { calcPrice, findProvider } from '@pydantic/genai-prices';
import { readFileSync } from 'node:fs';

if (process.argv[2] === 'dump') {
  process.stdout.write(JSON.stringify(process.argv.slice(3).map((id) => findProvider({ providerId: id }))));
} else {
  price();
}

function price() {
  const cases = JSON.parse(readFileSync(0, 'utf8'));
  const out = cases.map((c) => {
    try {
      const r = calcPrice(c.usage, c.model, { providerId: c.provider, timestamp: new Date(c.timestamp) });
      return r ? { total: r.total_price, matched: r.model.id } : null;
    } catch (e) {
      return { error: String(e.message || e) };
    }
  });
  process.stdout.write(JSON.stringify(out));
}
