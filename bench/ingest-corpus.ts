/** Deterministic ~5 KB markdown memories with realistic English vocabulary (for bench:ingest). */
const WORDS = (
  "the deploy service queue worker database migration rollback release canary traffic error budget latency " +
  "cache index shard replica primary failover backup restore snapshot retention policy owner team review " +
  "incident timeline alert page on-call dashboard metric threshold config flag rollout customer request " +
  "billing invoice payment retry timeout connection pool thread memory disk network region cluster node " +
  "container image build pipeline test lint coverage branch merge commit tag version changelog feature " +
  "because decided instead of trade-off faster safer simpler cheaper check verify confirm ensure before after " +
  "when then if every each most some never always usually often during while until since within across " +
  "we you they it our their this that these those is are was were be been has have had will would should can"
).split(/\s+/);

function rng(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
}

export function markdownMemory(i: number, targetBytes = 5 * 1024): string {
  const random = rng(i * 2654435761);
  const word = () => WORDS[Math.floor(random() * WORDS.length)]!;
  const sentence = () => {
    const n = 8 + Math.floor(random() * 14);
    const words = Array.from({ length: n }, word);
    words[0] = words[0]!.charAt(0).toUpperCase() + words[0]!.slice(1);
    return `${words.join(" ")}.`;
  };
  let text = `# Runbook ${i}: ${word()} ${word()}\n\n${sentence()} ${sentence()}\n`;
  let section = 0;
  while (Buffer.byteLength(text) < targetBytes) {
    section++;
    text += `\n## ${word()} ${word()} ${section}\n\n`;
    const paragraphs = 1 + Math.floor(random() * 3);
    for (let p = 0; p < paragraphs; p++) text += `${Array.from({ length: 3 + Math.floor(random() * 4) }, sentence).join(" ")}\n\n`;
    if (random() < 0.3) text += `- ${sentence()}\n- ${sentence()}\n- ${sentence()}\n`;
  }
  return text.slice(0, targetBytes + 200);
}
