// Prices each case on stdin ({provider, model, timestamp, usage}[]) with
// @pydantic/genai-prices' calcPrice and prints {total, matched} per case (null when it
// does not know the model, {error} when it refuses the usage). Run by
// pricing/crosscheck_test.go; usage keys are genai-prices' own (input_tokens includes
// cache reads and writes, cache_write_tokens includes 1-hour writes, output_tokens
// includes reasoning).
import { calcPrice } from '@pydantic/genai-prices';
import { readFileSync } from 'node:fs';

const cases = JSON.parse(readFileSync(0, 'utf8'));
console.warn = () => {}; // unsupported-key notices, one per model: not results
const out = cases.map((c) => {
  try {
    const r = calcPrice(c.usage, c.model, { providerId: c.provider, timestamp: new Date(c.timestamp) });
    return r ? { total: r.total_price, matched: r.provider.id + '/' + r.model.id } : null;
  } catch (e) {
    return { error: String(e.message || e) };
  }
});
process.stdout.write(JSON.stringify(out));
