// Shared by the embedding worker (lib/ai/local-embedder-worker.mjs) and the in-thread fallback in
// lib/ai/embedder.ts. Plain ESM: the worker loads it directly, outside the Next bundle.

/** Most padding a group may carry, as a share of its real word pieces. */
const MAX_PADDING = 0.1;
/** Most texts in one model call. */
const MAX_GROUP = 8;

/**
 * Splits texts (by their word-piece counts) into groups of similar length, each listed by index.
 * Sorted shortest first; a group closes when the next text would pad it by over MAX_PADDING.
 */
export function lengthGroups(lengths) {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a] - lengths[b] || a - b);
  const groups = [];
  let group = [];
  let sum = 0;
  for (const i of order) {
    const n = lengths[i];
    if (group.length > 0 && (group.length >= MAX_GROUP || n * (group.length + 1) > (sum + n) * (1 + MAX_PADDING))) {
      groups.push(group);
      group = [];
      sum = 0;
    }
    group.push(i);
    sum += n;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/**
 * Embeds `texts` with a feature-extraction model (mean pooling, unit length) and returns one
 * Float32Array per text, in input order.
 *
 * Why groups: a batch is padded to its longest text, and a padded word piece costs the model as
 * much as a real one. Chunks of 5 KB markdown run 105–256 word pieces; embedded as batches of 32
 * they took 56 ms each, in groups of similar length 34 ms (one thread, bench corpus).
 */
export async function embedInLengthGroups({ tokenizer, model, meanPooling }, texts, maxTokens) {
  const lengths = texts.map((text) => tokenizer(text, { truncation: true, max_length: maxTokens }).input_ids.dims.at(-1));
  const vectors = new Array(texts.length);
  for (const group of lengthGroups(lengths)) {
    const inputs = tokenizer(
      group.map((i) => texts[i]),
      { padding: true, truncation: true, max_length: maxTokens },
    );
    const output = await model(inputs);
    const pooled = meanPooling(output.last_hidden_state, inputs.attention_mask).normalize(2, -1);
    const dims = pooled.dims[1];
    group.forEach((i, k) => {
      vectors[i] = Float32Array.from(pooled.data.subarray(k * dims, (k + 1) * dims));
    });
  }
  return vectors;
}
