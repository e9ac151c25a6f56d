/**
 * A prune's loop: `find` reads up to `batch` ids of rows to delete, `remove` deletes those, and so on
 * until a batch comes back short or `maxBatches` ran. Each statement touches a bounded number of
 * rows, so a prune never holds locks for long. Returns the rows deleted.
 */
export async function deleteInBatches(
  find: (take: number) => Promise<{ id: string }[]>,
  remove: (ids: string[]) => Promise<{ count: number }>,
  batch: number,
  maxBatches: number,
): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const rows = await find(batch);
    if (rows.length === 0) break;
    total += (await remove(rows.map((row) => row.id))).count;
    if (rows.length < batch) break;
  }
  return total;
}
