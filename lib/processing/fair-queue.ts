/** The lane of ids whose hub the runner was not told (a sweep's or a caller's that did not say). */
export const UNKNOWN_HUB = "";

/**
 * The embedded runner's queue of memory ids: one lane per hub, taken in turn (round-robin), each lane
 * oldest first, and ahead of them all a lane of ids that go first (a dead process's jobs). One FIFO over
 * every hub made a bulk import into one hub hold every other hub's pushes until it was worked through.
 */
export class FairQueue {
  /** Hub → its ids in the order they came; the map's order is the turn order (the next lane first). */
  private readonly lanes = new Map<string, Set<string>>();
  private readonly laneOf = new Map<string, string>();
  private readonly first = new Set<string>();

  get size(): number {
    return this.first.size + this.laneOf.size;
  }

  has(id: string): boolean {
    return this.first.has(id) || this.laneOf.has(id);
  }

  /** At the end of its hub's lane; an id already queued keeps its place. */
  add(id: string, hub: string = UNKNOWN_HUB): void {
    if (this.has(id)) return;
    let lane = this.lanes.get(hub);
    if (!lane) this.lanes.set(hub, (lane = new Set()));
    lane.add(id);
    this.laneOf.set(id, hub);
  }

  /** Ids waiting in `hub`'s lane. */
  laneSize(hub: string): number {
    return this.lanes.get(hub)?.size ?? 0;
  }

  /** Ids waiting in the longest lane. */
  longestLane(): number {
    let longest = 0;
    for (const lane of this.lanes.values()) longest = Math.max(longest, lane.size);
    return longest;
  }

  /** At the end of the lane that goes first, out of its hub's lane if it was queued there. */
  addFirst(id: string): void {
    this.delete(id);
    this.first.add(id);
  }

  delete(id: string): boolean {
    if (this.first.delete(id)) return true;
    const hub = this.laneOf.get(id);
    if (hub === undefined) return false;
    this.laneOf.delete(id);
    const lane = this.lanes.get(hub)!;
    lane.delete(id);
    if (lane.size === 0) this.lanes.delete(hub);
    return true;
  }

  /** The next id: the first lane's head, else the head of the hub whose turn it is (that hub goes to the back). */
  shift(): string | undefined {
    const head = this.first.values().next().value;
    if (head !== undefined) {
      this.first.delete(head);
      return head;
    }
    const turn = this.lanes.entries().next().value;
    if (!turn) return undefined;
    const [hub, lane] = turn;
    const id = lane.values().next().value!;
    lane.delete(id);
    this.laneOf.delete(id);
    this.lanes.delete(hub);
    if (lane.size > 0) this.lanes.set(hub, lane);
    return id;
  }

  /**
   * Takes out the id queued last in the longest lane (never of the first lane), so a hub with a few ids
   * keeps them; returns that lane's hub, or undefined when no lane holds any.
   */
  dropNewest(): string | undefined {
    let longest: [string, Set<string>] | undefined;
    for (const entry of this.lanes) if (!longest || entry[1].size > longest[1].size) longest = entry;
    if (!longest) return undefined;
    const [hub, lane] = longest;
    this.delete([...lane].at(-1)!);
    return hub;
  }

  clear(): void {
    this.first.clear();
    this.lanes.clear();
    this.laneOf.clear();
  }
}
