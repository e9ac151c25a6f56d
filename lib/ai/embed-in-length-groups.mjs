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
 *
 * Each text is tokenised once: a group's padded batch is assembled from its texts' word pieces
 * (padded as the tokenizer pads: the pad token, attention and type 0, on the right), not tokenised
 * again. Pooling and normalising are transformers.js's `mean_pooling(...).normalize(2, -1)`, step
 * for step (a mean in doubles, a float32 sum of squares), without its generic index arithmetic.
 * The vectors are bit for bit those of the tokenizer's own padding and those helpers
 * (tests/ai-embedder.test.ts). For a one-line query this is ~0.5 ms of the ~5 ms it takes (2 cores).
 */
export async function embedInLengthGroups({ tokenizer, model, Tensor }, texts, maxTokens) {
  const encoded = texts.map((text) => tokenizer(text, { truncation: true, max_length: maxTokens }));
  const lengths = encoded.map((inputs) => inputs.input_ids.dims.at(-1));
  const pad = BigInt(tokenizer.pad_token_id ?? 0);
  const vectors = new Array(texts.length);
  for (const group of lengthGroups(lengths)) {
    const width = Math.max(...group.map((i) => lengths[i]));
    const inputs = {};
    for (const name of Object.keys(encoded[group[0]])) {
      const data = new BigInt64Array(group.length * width);
      if (name === "input_ids" && pad !== 0n) data.fill(pad);
      group.forEach((i, row) => data.set(encoded[i][name].data, row * width));
      inputs[name] = new Tensor("int64", data, [group.length, width]);
    }
    const hidden = (await model(inputs)).last_hidden_state;
    const [, seq, dims] = hidden.dims;
    group.forEach((i, row) => {
      vectors[i] = meanUnitVector(hidden.data, row * seq * dims, lengths[i], dims);
    });
  }
  return vectors;
}

/** The mean of a text's first `count` token states (its real word pieces), scaled to unit length. */
function meanUnitVector(states, offset, count, dims) {
  const sums = new Float64Array(dims);
  for (let j = 0; j < count; j++) {
    const base = offset + j * dims;
    for (let k = 0; k < dims; k++) sums[k] += states[base + k];
  }
  const vector = new Float32Array(dims);
  const squares = new Float32Array(1);
  for (let k = 0; k < dims; k++) {
    vector[k] = sums[k] / count;
    squares[0] += vector[k] ** 2;
  }
  const norm = Math.fround(squares[0] ** 0.5);
  for (let k = 0; k < dims; k++) vector[k] /= norm;
  return vector;
}
