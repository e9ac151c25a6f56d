import type { DreamConfig } from "./dream-config.ts";
import { dot } from "./find-similar-pairs.ts";
import { isValueToken } from "./text-features.ts";

export interface OrganizeInput {
  /** Unsorted memories with their embedding and words. */
  unsorted: { id: string; embedding: Float32Array; words: Set<string> }[];
  /** Existing topics with the embeddings of their memories. */
  topics: { id: string; name: string; embeddings: Float32Array[] }[];
  /** Document frequency of words across the hub (for distinctive names). */
  df: Map<string, number>;
  hubSize: number;
  /** How many more topics the hub may have. */
  topicRoom: number;
  /** Every topic name of the hub, archived ones too: a new topic may take none of them. */
  takenNames?: string[];
}

export interface OrganizePlan {
  /** memory id → existing topic id */
  assign: Map<string, string>;
  /** new topics: a name and their memories */
  create: { name: string; memoryIds: string[] }[];
}

/** Open clusters at most: bounds the work to n × this comparisons. */
const MAX_OPEN_CLUSTERS = 150;

class Centroid {
  readonly sum: Float32Array;
  norm = 0;
  constructor(dim: number) {
    this.sum = new Float32Array(dim);
  }
  add(v: Float32Array): void {
    let norm = 0;
    for (let i = 0; i < v.length; i++) {
      this.sum[i] = this.sum[i]! + v[i]!;
      norm += this.sum[i]! * this.sum[i]!;
    }
    this.norm = Math.sqrt(norm);
  }
  cosine(v: Float32Array): number {
    return this.norm === 0 ? 0 : dot(this.sum, v) / this.norm;
  }
}

/**
 * Unsorted memories go to the nearest existing topic when it is close enough;
 * the rest are clustered (leader clustering on embedding centroids) and each
 * large enough cluster becomes a topic named from its most distinctive words.
 */
export function organizeMemories(input: OrganizeInput, config: DreamConfig): OrganizePlan {
  const assign = new Map<string, string>();
  const dim = input.unsorted[0]?.embedding.length ?? 0;
  const topicCentroids = input.topics.flatMap((topic) => {
    if (topic.embeddings.length === 0) return [];
    const c = new Centroid(dim);
    for (const e of topic.embeddings) c.add(e);
    return [{ id: topic.id, centroid: c }];
  });
  const leftover: OrganizeInput["unsorted"] = [];
  for (const memory of input.unsorted) {
    let best: string | undefined;
    let bestScore = config.topicCosine;
    for (const topic of topicCentroids) {
      const score = topic.centroid.cosine(memory.embedding);
      if (score >= bestScore) {
        bestScore = score;
        best = topic.id;
      }
    }
    if (best) assign.set(memory.id, best);
    else leftover.push(memory);
  }
  const clusters: { centroid: Centroid; members: OrganizeInput["unsorted"] }[] = [];
  for (const memory of leftover) {
    let best: (typeof clusters)[number] | undefined;
    let bestScore = config.clusterCosine;
    for (const cluster of clusters) {
      const score = cluster.centroid.cosine(memory.embedding);
      if (score >= bestScore) {
        bestScore = score;
        best = cluster;
      }
    }
    if (!best) {
      if (clusters.length >= MAX_OPEN_CLUSTERS) continue;
      best = { centroid: new Centroid(dim), members: [] };
      clusters.push(best);
    }
    best.centroid.add(memory.embedding);
    best.members.push(memory);
  }
  const room = Math.min(config.maxNewTopicsPerRun, input.topicRoom);
  const taken = new Set([...input.topics.map((t) => t.name), ...(input.takenNames ?? [])].map((name) => name.toLowerCase()));
  const create = clusters
    .filter((c) => c.members.length >= config.minClusterSize)
    .sort((x, y) => y.members.length - x.members.length)
    .slice(0, room)
    .map((cluster) => {
      const name = uniqueName(topicName(cluster.members, input.df, input.hubSize), taken);
      taken.add(name.toLowerCase());
      return { name, memoryIds: cluster.members.map((m) => m.id) };
    });
  return { assign, create };
}

/** The two words most typical of the cluster and rare in the hub, e.g. "Stripe & Billing". */
export function topicName(members: { words: Set<string> }[], df: Map<string, number>, hubSize: number): string {
  const counts = new Map<string, number>();
  for (const m of members) for (const w of m.words) if (!isValueToken(w) && w.length >= 3) counts.set(w, (counts.get(w) ?? 0) + 1);
  const scored = [...counts]
    .filter(([, c]) => c >= Math.max(2, Math.ceil(members.length * 0.3)))
    .map(([w, c]) => [w, (c / members.length) * Math.log((hubSize + 1) / (df.get(w) ?? 1))] as const)
    .sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1));
  const words = scored.slice(0, 2).map(([w]) => w.charAt(0).toUpperCase() + w.slice(1));
  return words.length ? words.join(" & ") : "Unsorted notes";
}

export function uniqueName(name: string, taken: Set<string>): string {
  if (!taken.has(name.toLowerCase())) return name;
  for (let i = 2; ; i++) if (!taken.has(`${name} ${i}`.toLowerCase())) return `${name} ${i}`;
}
