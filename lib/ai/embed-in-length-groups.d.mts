// Types of lib/ai/embed-in-length-groups.mjs (plain ESM, shared with the embedding worker).
export function lengthGroups(lengths: number[]): number[][];

export interface FeatureExtractor {
  tokenizer: ((text: string, options: Record<string, unknown>) => Record<string, { dims: number[]; data: BigInt64Array }>) & { pad_token_id?: number | null };
  model: (inputs: Record<string, unknown>) => Promise<{ last_hidden_state: { dims: number[]; data: Float32Array } }>;
  /** transformers.js's Tensor class, to build the padded batches. */
  Tensor: new (type: "int64", data: BigInt64Array, dims: number[]) => unknown;
}

export function embedInLengthGroups(extractor: FeatureExtractor, texts: string[], maxTokens: number): Promise<Float32Array[]>;
