// Types of lib/ai/embed-in-length-groups.mjs (plain ESM, shared with the embedding worker).
export function lengthGroups(lengths: number[]): number[][];

export interface FeatureExtractor {
  tokenizer: (texts: string | string[], options: Record<string, unknown>) => { input_ids: { dims: number[] }; attention_mask: unknown };
  model: (inputs: unknown) => Promise<{ last_hidden_state: unknown }>;
  meanPooling: (state: unknown, mask: unknown) => { normalize(p: number, dim: number): { dims: number[]; data: Float32Array } };
}

export function embedInLengthGroups(extractor: FeatureExtractor, texts: string[], maxTokens: number): Promise<Float32Array[]>;
