import { runAsBackground } from "@/lib/db/background-work.ts";
import type { SqlRunner } from "@/lib/db/database.ts";

/**
 * The lexical leg's in-memory inverted index (one per database handle in each server process).
 *
 * Why: on 10k chunks the SQL leg (engram_lexical_search) spends ~10 ms reading and ranking up to
 * 600 candidate chunks' tsvectors, and stops there, which costs quality on corpora whose questions
 * use common words. Postings in memory score exact BM25 over every matching chunk in ~1 ms.
 *
 * What it holds, per loaded hub: every chunk of an active memory (its stored search_vector) and
 * every active memory not chunked yet (pending/running, matched whole: read-your-writes), the same
 * documents the SQL leg reads. A memory sent back to processing by an edit is held whole, not by its
 * chunks: they are its old version's until the index step replaces them. The statistics (df, idf, chunk count, average length) still come from
 * the database on every query, so scores match the SQL leg's exactly.
 *
 * Coherence across processes: triggers append every change that affects those documents to
 * recall_index_changes with the writing transaction's id. Each query reads exactly the changes
 * its process's previous catch-up could not see (transactions at or after that snapshot's xmax, or
 * in progress then: a transaction that commits late is still seen) and reloads those memories.
 * Pruning the log or a TRUNCATE raises recall_index_horizon; a process whose last catch-up is not
 * past it rebuilds.
 */

/** Postings of one term in one hub: document numbers and term frequencies. */
class Postings {
  docs = new Int32Array(4);
  tfs = new Uint16Array(4);
  size = 0;

  /** Drops the spare room of the last doubling (a loaded hub's postings are mostly final). */
  trim(): void {
    if (this.size === this.docs.length) return;
    this.docs = this.docs.slice(0, this.size);
    this.tfs = this.tfs.slice(0, this.size);
  }

  push(doc: number, tf: number): void {
    if (this.size === this.docs.length) {
      const docs = new Int32Array(this.size * 2);
      docs.set(this.docs);
      this.docs = docs;
      const tfs = new Uint16Array(this.size * 2);
      tfs.set(this.tfs);
      this.tfs = tfs;
    }
    this.docs[this.size] = doc;
    this.tfs[this.size] = Math.min(tf, 65535);
    this.size++;
  }
}

interface IndexedDocument {
  /** null for a memory not chunked yet (indexed whole). */
  chunkId: string | null;
  memoryId: string;
  /** The stored tsvector as text. */
  vector: string;
}

/** One hub's documents. Removed documents are tombstoned; a hub with many tombstones is reloaded. */
class HubIndex {
  /** When a search last used it (the least recently used hub is evicted first). */
  usedAt = 0;
  chunkIds: (string | null)[] = [];
  memoryIds: string[] = [];
  lengths: number[] = [];
  alive: boolean[] = [];
  dead = 0;
  postings = new Map<string, Postings>();
  byMemory = new Map<string, number[]>();

  get live(): number {
    return this.chunkIds.length - this.dead;
  }

  add(document: IndexedDocument): void {
    const doc = this.chunkIds.length;
    let length = 0;
    parseTsvector(document.vector, (lexeme, tf) => {
      length += tf;
      let postings = this.postings.get(lexeme);
      if (!postings) this.postings.set(lexeme, (postings = new Postings()));
      postings.push(doc, tf);
    });
    this.chunkIds.push(document.chunkId);
    this.memoryIds.push(document.memoryId);
    // The SQL leg's length: greatest(search_length, 1), search_length being the sum of term frequencies.
    this.lengths.push(Math.max(length, 1));
    this.alive.push(true);
    const docs = this.byMemory.get(document.memoryId);
    if (docs) docs.push(doc);
    else this.byMemory.set(document.memoryId, [doc]);
  }

  removeMemory(memoryId: string): void {
    const docs = this.byMemory.get(memoryId);
    if (!docs) return;
    for (const doc of docs) {
      if (this.alive[doc]) {
        this.alive[doc] = false;
        this.dead++;
      }
    }
    this.byMemory.delete(memoryId);
  }
}

/**
 * Calls `each(lexeme, tf)` for every lexeme of a tsvector's text form (`'word':1,4A 'it''s':2`):
 * tf is its number of positions (1 without positions), as the SQL leg counts it.
 */
export function parseTsvector(text: string, each: (lexeme: string, tf: number) => void): void {
  const n = text.length;
  let i = 0;
  while (i < n) {
    if (text.charCodeAt(i) !== 39) {
      i++;
      continue;
    }
    i++;
    let lexeme = "";
    let start = i;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 39) {
        // '' is a quote inside the lexeme; a lone ' ends it.
        if (text.charCodeAt(i + 1) === 39) {
          lexeme += text.slice(start, i + 1);
          i += 2;
          start = i;
          continue;
        }
        break;
      }
      if (c === 92) {
        lexeme += text.slice(start, i) + text.charAt(i + 1);
        i += 2;
        start = i;
        continue;
      }
      i++;
    }
    lexeme += text.slice(start, i);
    i++;
    let tf = 1;
    if (text.charCodeAt(i) === 58) {
      i++;
      while (i < n && text.charCodeAt(i) !== 32) {
        if (text.charCodeAt(i) === 44) tf++;
        i++;
      }
    }
    each(lexeme, tf);
  }
}

export interface IndexedTerm {
  term: string;
  idf: number;
}

export interface IndexedHit {
  chunkId: string | null;
  memoryId: string;
  bm25: number;
  matchedIdf: number;
  matchedTerms: string[];
}

export interface IndexChange {
  hubId: string;
  memoryId: string;
  /** The transaction that made the change (committed, for the catch-up that read it). */
  xid: bigint;
}

/** A snapshot (pg_current_snapshot): what a catch-up saw, and so what the next one must read. */
export interface IndexSnapshot {
  /** Every transaction below it had finished. */
  xmin: bigint;
  /** Every transaction at or after it had not started. */
  xmax: bigint;
  /** Transactions in progress. */
  xip: bigint[];
}

/** What one query's statistics statement told the index about the database's state. */
export interface IndexCatchUp {
  /** The snapshot the statement read changes after (null: none, nothing was read). */
  since: IndexSnapshot | null;
  /** The statement's own snapshot. */
  snapshot: IndexSnapshot;
  horizon: bigint;
  changes: IndexChange[];
  /** True when the changes were cut at the statement's limit: rebuild rather than replay. */
  truncated: boolean;
}

/** A snapshot as the statements here return it: its xmin, xmax and in-progress list as text. */
export function snapshotFromRow(row: { snapshot_xmin: string | null; snapshot_xmax: string | null; snapshot_xip: string[] | null }): IndexSnapshot {
  return { xmin: BigInt(row.snapshot_xmin ?? "0"), xmax: BigInt(row.snapshot_xmax ?? "0"), xip: (row.snapshot_xip ?? []).map((xid) => BigInt(xid)) };
}

/**
 * Whether `snapshot` sees transaction `xid` as finished: it had started (below xmax) and was not in
 * progress. A reload with such a snapshot read the memory as that transaction left it, or later.
 * An empty snapshot (xmax 0: none was read) sees none.
 */
export function seesFinished(snapshot: IndexSnapshot, xid: bigint): boolean {
  return xid < snapshot.xmax && !snapshot.xip.includes(xid);
}

/** Most tombstoned documents in a hub before it is reloaded instead (share of its documents). */
const MAX_DEAD_SHARE = 0.3;
/** Memories reloaded per statement. */
const RELOAD_BATCH = 500;
/** Hubs this small (chunks) load within the search that needs them (~50 ms); larger ones in the background. */
const INLINE_LOAD_MAX = 2000;
/** Memories read per statement of a background load (the embedded database answers others in between). */
const LOAD_PAGE = 500;
/** Reload times remembered (one entry per memory) before they are forgotten, which only costs a reload. */
const RELOADED_KEPT = 50_000;

export class LexicalIndex {
  private hubs = new Map<string, HubIndex>();
  /** Hubs being read in the background, each with the memories that changed meanwhile. */
  private loading = new Map<string, Set<string>>();
  /** Bumped by clear(): a background load begun before it is discarded. */
  private generation = 0;
  private cursor: IndexSnapshot | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  /**
   * The snapshot of the last reload that read each memory, since the last hub was installed.
   * Concurrent recalls read overlapping changes (each since the same cursor), and their syncs run
   * one at a time: without this, each reloaded the same memories again, one round trip after
   * another, while every recall behind it waited (under a mixed load, most of a recall's time). A
   * reload whose snapshot sees a change's transaction as finished read the memory as that change
   * left it or later, so the query need not reload it. (Comparing the whole snapshots instead
   * reloaded again whenever any transaction on the server, in any database, began between two
   * recalls' statements.) Installing a hub forgets
   * it all: a reload reads only the hubs held when it runs.
   */
  private reloadedAt = new Map<string, IndexSnapshot>();
  /**
   * The changes of syncs still waiting for their turn. The sync running reloads their memories with
   * its own, in one statement, so the syncs behind it find them reloaded: one round trip for a
   * burst of recalls instead of one each. Reloading a memory early is always safe (it reads what
   * is stored now); each sync still applies its own changes in its turn.
   */
  private waiting: { changes: IndexChange[] }[] = [];

  constructor(
    private readonly sql: SqlRunner,
    private readonly options: { inlineLoadMax: number; loadPage: number } = { inlineLoadMax: INLINE_LOAD_MAX, loadPage: LOAD_PAGE },
  ) {}

  /** The snapshot of the last catch-up: the next statistics statement reads the changes it could not see. */
  get since(): IndexSnapshot | null {
    return this.cursor;
  }

  /** Documents held in all loaded hubs. */
  get size(): number {
    let total = 0;
    for (const hub of this.hubs.values()) total += hub.live;
    return total;
  }

  /**
   * Applies a query's catch-up and makes sure the hubs it searches are held: small ones load at
   * once, larger ones start loading in the background (the least recently searched hubs are
   * evicted to stay within `capacity` documents). Resolves whether the index can answer the query
   * now: false while a hub is still loading, or when the query's own hubs (`chunks`: their sizes
   * from the statistics) exceed the capacity; the caller then searches in SQL.
   */
  sync(catchUp: IndexCatchUp, hubs: { id: string; chunks: number }[], capacity: number): Promise<boolean> {
    const entry = { changes: catchUp.changes };
    if (entry.changes.length > 0) this.waiting.push(entry);
    return this.locked(async () => {
      try {
        return await this.syncNow(catchUp, hubs, capacity);
      } finally {
        // Taken by this sync or an earlier one, unless this one returned before its catch-up (over
        // capacity): then it must not stay behind, or such syncs would pile up here.
        const at = this.waiting.indexOf(entry);
        if (at >= 0) this.waiting.splice(at, 1);
      }
    });
  }

  /** Runs `fn` after every sync and install before it: the index changes one step at a time. */
  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async syncNow(catchUp: IndexCatchUp, hubs: { id: string; chunks: number }[], capacity: number): Promise<boolean> {
    const wanted = new Set(hubs.map((hub) => hub.id));
    const needed = hubs.reduce((sum, hub) => sum + (this.hubs.get(hub.id)?.live ?? hub.chunks), 0);
    if (needed > capacity) return false;
    // Rows this process never saw may have been pruned (or the tables truncated): start over.
    if (catchUp.since !== null && (catchUp.horizon >= catchUp.since.xmin || catchUp.truncated)) this.clear();
    // (Cleared since this query read its changes: the loads below are newer than them.)
    if (this.cursor !== null || catchUp.since === null) {
      const memories = new Set<string>();
      const stale = (change: IndexChange) => {
        const reloaded = this.reloadedAt.get(change.memoryId);
        return this.hubs.has(change.hubId) && !(reloaded && seesFinished(reloaded, change.xid));
      };
      for (const change of catchUp.changes) {
        if (this.hubs.has(change.hubId)) {
          if (stale(change)) memories.add(change.memoryId);
        } else this.loading.get(change.hubId)?.add(change.memoryId);
      }
      for (const queued of this.waiting.splice(0)) for (const change of queued.changes) if (stale(change)) memories.add(change.memoryId);
      await this.reload([...memories]);
    }
    // Tombstones cost every search that walks their postings: reload such a hub from scratch.
    for (const [id, hub] of this.hubs) if (hub.dead > 100 && hub.dead > MAX_DEAD_SHARE * hub.chunkIds.length) this.hubs.delete(id);
    const missing = hubs.filter((hub) => !this.hubs.has(hub.id));
    const missingChunks = missing.reduce((sum, hub) => sum + hub.chunks, 0);
    let ready = missing.length === 0;
    if (!ready && missingChunks <= this.options.inlineLoadMax) {
      this.evict(missingChunks, capacity, wanted);
      for (const hub of missing) this.install(hub.id, await this.readHub(hub.id));
      ready = true;
    } else {
      for (const hub of missing) this.startLoad(hub, capacity);
    }
    const now = performance.now();
    for (const id of wanted) {
      const hub = this.hubs.get(id);
      if (hub) hub.usedAt = now;
    }
    // Concurrent queries may apply out of order: keep the later snapshot (it saw at least as much).
    const next = catchUp.snapshot;
    if (this.cursor === null || next.xmax > this.cursor.xmax || (next.xmax === this.cursor.xmax && next.xip.length <= this.cursor.xip.length)) {
      this.cursor = next;
    }
    return ready;
  }

  private clear(): void {
    this.hubs.clear();
    this.loading.clear();
    this.reloadedAt.clear();
    this.generation++;
    this.cursor = null;
  }

  /**
   * Holds a hub's index from now on. A background read of the same hub still under way is abandoned:
   * its copy is older than this one, and changes from now on are applied here, not noted for it.
   */
  private install(hubId: string, hub: HubIndex): void {
    this.loading.delete(hubId);
    this.hubs.set(hubId, hub);
    this.reloadedAt.clear();
  }

  /** Drops the least recently searched hubs (never those in `keep`) until `incoming` more documents fit. */
  private evict(incoming: number, capacity: number, keep: Set<string>): void {
    let size = this.size + incoming;
    for (const [id, hub] of [...this.hubs].sort((x, y) => x[1].usedAt - y[1].usedAt)) {
      if (size <= capacity) break;
      if (keep.has(id)) continue;
      this.hubs.delete(id);
      size -= hub.live;
    }
  }

  /**
   * Reads a hub as background work, then installs it and reloads the memories that changed while
   * it was read (every sync meanwhile noted them).
   */
  private startLoad(target: { id: string; chunks: number }, capacity: number): void {
    if (this.loading.has(target.id)) return;
    const changed = new Set<string>();
    this.loading.set(target.id, changed);
    const generation = this.generation;
    const read = runAsBackground(() => this.readHub(target.id));
    void read
      .then((hub) =>
        this.locked(async () => {
          if (generation !== this.generation || this.loading.get(target.id) !== changed) return;
          this.loading.delete(target.id);
          this.evict(hub.live, capacity, new Set([target.id]));
          hub.usedAt = performance.now();
          this.install(target.id, hub);
          await this.reload([...changed]);
        }),
      )
      .catch((error: unknown) => {
        if (this.loading.get(target.id) === changed) this.loading.delete(target.id);
        console.error("[engram] recall: loading a hub into the lexical index failed; searching it in SQL", error);
      });
  }

  /** Resolves once no hub is loading in the background (tests, benchmarks). */
  async settled(): Promise<void> {
    while (this.loading.size > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await this.locked(async () => undefined);
  }

  /** One hub's documents, read in pages of memories (newest first) so no statement is long. */
  private async readHub(hubId: string): Promise<HubIndex> {
    const hub = new HubIndex();
    let cursor: { at: string; id: string } | null = null;
    for (;;) {
      const rows: { chunk_id: string | null; memory_id: string | null; vec: string | null; last_at: string | null; last_id: string | null; memories: number | null }[] =
        await this.sql.query(
          `WITH page AS MATERIALIZED (
             SELECT m.id, m.created_at, m.processing_status, m.search_vector
             FROM memories m
             WHERE m.hub_id = $1::uuid AND m.state = 'active'
               AND ($2::timestamptz IS NULL OR (m.created_at, m.id) < ($2::timestamptz, $3::uuid))
             ORDER BY m.created_at DESC, m.id DESC
             LIMIT $4::int
           )
           SELECT c.id AS chunk_id, c.memory_id, c.search_vector::text AS vec, NULL::text AS last_at, NULL::uuid AS last_id, NULL::int AS memories
           FROM page p JOIN chunks c ON c.memory_id = p.id
           WHERE c.hub_id = $1::uuid AND c.search_vector IS NOT NULL AND p.processing_status NOT IN ('pending', 'running')
           UNION ALL
           SELECT NULL, p.id, p.search_vector::text, NULL, NULL, NULL
           FROM page p WHERE p.processing_status IN ('pending', 'running') AND p.search_vector IS NOT NULL
           UNION ALL
           (SELECT NULL, NULL, NULL, p.created_at::text, p.id, (SELECT count(*)::int FROM page)
            FROM page p ORDER BY p.created_at, p.id LIMIT 1)`,
          [hubId, cursor?.at ?? null, cursor?.id ?? null, this.options.loadPage],
        );
      let memories = 0;
      for (const row of rows) {
        if (row.last_id) {
          cursor = { at: row.last_at!, id: row.last_id };
          memories = Number(row.memories);
        } else if (row.memory_id && row.vec !== null) hub.add({ chunkId: row.chunk_id, memoryId: row.memory_id, vector: row.vec });
      }
      if (memories < this.options.loadPage) break;
    }
    for (const postings of hub.postings.values()) postings.trim();
    return hub;
  }

  private async reload(memoryIds: string[]): Promise<void> {
    for (let i = 0; i < memoryIds.length; i += RELOAD_BATCH) {
      const batch = memoryIds.slice(i, i + RELOAD_BATCH);
      // With the statement's own snapshot: what it read is what that snapshot sees.
      const rows = await this.sql.query<{
        hub_id: string | null;
        chunk_id: string | null;
        memory_id: string | null;
        vec: string | null;
        snapshot_xmin: string | null;
        snapshot_xmax: string | null;
        snapshot_xip: string[] | null;
      }>(
        `SELECT c.hub_id, c.id AS chunk_id, c.memory_id, c.search_vector::text AS vec, NULL::text AS snapshot_xmin, NULL::text AS snapshot_xmax, NULL::text[] AS snapshot_xip
         FROM chunks c JOIN memories m ON m.id = c.memory_id
         WHERE c.memory_id = ANY($1::uuid[]) AND c.hub_id = ANY($2::uuid[]) AND c.search_vector IS NOT NULL
           AND m.state = 'active' AND m.hub_id = c.hub_id AND m.processing_status NOT IN ('pending', 'running')
         UNION ALL
         SELECT m.hub_id, NULL, m.id, m.search_vector::text, NULL, NULL, NULL
         FROM memories m
         WHERE m.id = ANY($1::uuid[]) AND m.hub_id = ANY($2::uuid[]) AND m.processing_status IN ('pending', 'running')
           AND m.state = 'active' AND m.search_vector IS NOT NULL
         UNION ALL
         SELECT NULL, NULL, NULL, NULL, pg_snapshot_xmin(s)::text, pg_snapshot_xmax(s)::text, ARRAY(SELECT x::text FROM pg_snapshot_xip(s) AS x)
         FROM pg_current_snapshot() AS s`,
        [batch, [...this.hubs.keys()]],
      );
      let snapshot: IndexSnapshot | undefined;
      for (const memoryId of batch) for (const hub of this.hubs.values()) hub.removeMemory(memoryId);
      for (const row of rows) {
        if (row.snapshot_xmax !== null) snapshot = snapshotFromRow(row);
        else if (row.hub_id && row.memory_id && row.vec !== null) this.hubs.get(row.hub_id)?.add({ chunkId: row.chunk_id, memoryId: row.memory_id, vector: row.vec });
      }
      if (!snapshot) continue;
      if (this.reloadedAt.size + batch.length > RELOADED_KEPT) this.reloadedAt.clear();
      for (const memoryId of batch) this.reloadedAt.set(memoryId, snapshot);
    }
  }

  /**
   * Exact BM25 (k1, b) of every document of `hubIds` holding any of `terms`, best first, at most
   * `limit`. Ties go to the lower chunk (or memory) id, so the order is stable. Null when a hub is
   * not held (any more).
   */
  search(hubIds: string[], terms: IndexedTerm[], avgdl: number, k1: number, b: number, limit: number): { hits: IndexedHit[]; candidates: number } | null {
    // A concurrent search may have evicted one of these hubs since this one's sync: let SQL answer.
    const held = [...new Set(hubIds)].map((id) => this.hubs.get(id));
    if (held.some((hub) => !hub)) return null;
    const hits: IndexedHit[] = [];
    let candidates = 0;
    for (const hub of held as HubIndex[]) {
      const { bm25, matched, mask } = this.scratchFor(hub.chunkIds.length);
      const touched: number[] = [];
      const norm = terms.length > 32 ? terms.slice(0, 32) : terms;
      norm.forEach(({ term, idf }, t) => {
        const postings = hub.postings.get(term);
        if (!postings) return;
        const { docs, tfs, size } = postings;
        const bit = 1 << t;
        for (let j = 0; j < size; j++) {
          const doc = docs[j]!;
          if (!hub.alive[doc]) continue;
          const tf = tfs[j]!;
          if (mask[doc] === 0) touched.push(doc);
          mask[doc] = mask[doc]! | bit;
          matched[doc] = matched[doc]! + idf;
          bm25[doc] = bm25[doc]! + (idf * tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * hub.lengths[doc]!) / avgdl));
        }
      });
      candidates += touched.length;
      for (const doc of bestDocuments(touched, limit, (x, y) => bm25[y]! - bm25[x]! || compareIds(hub, x, y))) {
        const bits = mask[doc]!;
        hits.push({
          chunkId: hub.chunkIds[doc]!,
          memoryId: hub.memoryIds[doc]!,
          bm25: bm25[doc]!,
          matchedIdf: matched[doc]!,
          matchedTerms: norm.flatMap(({ term }, t) => ((bits >>> t) & 1 ? [term] : [])),
        });
      }
      for (const doc of touched) {
        bm25[doc] = 0;
        matched[doc] = 0;
        mask[doc] = 0;
      }
    }
    hits.sort((x, y) => y.bm25 - x.bm25 || (x.chunkId ?? x.memoryId).localeCompare(y.chunkId ?? y.memoryId));
    return { hits: hits.slice(0, limit), candidates };
  }

  /**
   * Per-document accumulators for search(), kept between searches and zeroed after each hub: at
   * 60k chunks, allocating them per query cost more than the scoring. (Searches are synchronous,
   * so one set serves every search of the process.)
   */
  private scratch = { bm25: new Float64Array(0), matched: new Float64Array(0), mask: new Uint32Array(0) };

  private scratchFor(count: number): { bm25: Float64Array; matched: Float64Array; mask: Uint32Array } {
    if (this.scratch.bm25.length < count) {
      const size = Math.max(count, this.scratch.bm25.length * 2);
      // One bit per query term in mask (at most 32 terms, the SQL leg's cap too).
      this.scratch = { bm25: new Float64Array(size), matched: new Float64Array(size), mask: new Uint32Array(size) };
    }
    return this.scratch;
  }
}

/**
 * The `limit` first of `docs` in `order`, sorted: a bounded heap instead of sorting every match
 * (a query of common words matches tens of thousands of chunks in a large hub).
 */
export function bestDocuments(docs: number[], limit: number, order: (x: number, y: number) => number): number[] {
  if (limit <= 0) return [];
  // heap[0] is the last in `order` of those kept.
  const heap: number[] = [];
  const below = (i: number, j: number) => order(heap[i]!, heap[j]!) > 0;
  const swap = (i: number, j: number) => ([heap[i], heap[j]] = [heap[j]!, heap[i]!]);
  for (const doc of docs) {
    if (heap.length < limit) {
      heap.push(doc);
      for (let i = heap.length - 1; i > 0; ) {
        const parent = (i - 1) >> 1;
        if (!below(i, parent)) break;
        swap(i, parent);
        i = parent;
      }
    } else if (order(doc, heap[0]!) < 0) {
      heap[0] = doc;
      for (let i = 0; ; ) {
        const left = 2 * i + 1;
        const right = left + 1;
        let last = i;
        if (left < heap.length && below(left, last)) last = left;
        if (right < heap.length && below(right, last)) last = right;
        if (last === i) break;
        swap(i, last);
        i = last;
      }
    }
  }
  return heap.sort(order);
}

function compareIds(hub: HubIndex, x: number, y: number): number {
  const a = hub.chunkIds[x] ?? hub.memoryIds[x]!;
  const b = hub.chunkIds[y] ?? hub.memoryIds[y]!;
  return a < b ? -1 : a > b ? 1 : 0;
}

const indexes = new WeakMap<SqlRunner, LexicalIndex>();

/**
 * The process's index over one database handle (created empty, with `options` on first use;
 * hubs load on first search).
 */
export function lexicalIndexFor(sql: SqlRunner, options?: ConstructorParameters<typeof LexicalIndex>[1]): LexicalIndex {
  let index = indexes.get(sql);
  if (!index) indexes.set(sql, (index = new LexicalIndex(sql, options)));
  return index;
}
