import { messages, protocol, types, type PGlite, type QueryOptions, type Results } from "@electric-sql/pglite";

type ParserTable = PGlite["parsers"];
type BackendMessage = Parameters<Parameters<InstanceType<typeof protocol.Parser>["parse"]>[1]>[0];

/** A NOTIFY the backend delivered with a statement's result (PGlite's listeners never saw it). */
export interface DeliveredNotification {
  channel: string;
  payload: string;
}

export interface ReadResults {
  result: Results<unknown>;
  /** The first error the backend reported (PGlite's own `DatabaseError`), if any. */
  error: Error | undefined;
  notifications: DeliveredNotification[];
}

/**
 * Reads one extended-protocol exchange's reply (Bind … Sync) from the backend's raw bytes into the
 * result PGlite's `parseResults` would build from its parsed messages: the same rows (objects or
 * arrays), fields, command, affectedRows and rowCount, each value through the same type parsers.
 *
 * Why not PGlite's parser: it copies every field into an ArrayBuffer of its own before decoding it
 * and builds a message object per row, then `parseResults` maps each row again. On a recall (~110
 * rows, ~950 fields over four statements) that was ~3 ms of the main thread, more than the
 * candidates statement's HNSW search. Here a row is read straight from the reply into its object.
 *
 * Errors and notices, rare, are handed to PGlite's own parser, so they are exactly the objects its
 * `query` produces. A notification is returned for the caller to deliver.
 */
export function readResults(reply: Buffer, parsers: ParserTable, options: QueryOptions | undefined): ReadResults {
  const arrays = options?.rowMode === "array";
  let fields: { name: string; dataTypeID: number }[] = [];
  let rows: unknown[] = [];
  let result: Results<unknown> | undefined;
  let affectedRows = 0;
  let error: Error | undefined;
  const notifications: DeliveredNotification[] = [];
  let offset = 0;
  while (offset + 5 <= reply.length) {
    const code = reply[offset]!;
    const length = reply.readInt32BE(offset + 1);
    const start = offset + 5;
    const end = offset + 1 + length;
    if (length < 4 || end > reply.length) throw new Error(`engram: truncated reply from the embedded database (message ${String.fromCharCode(code)})`);
    offset = end;
    if (error) continue; // after an error PGlite keeps only the error
    switch (code) {
      case 0x44: {
        // DataRow
        let at = start + 2;
        const count = reply.readInt16BE(start);
        if (arrays) {
          const row: unknown[] = new Array(count);
          for (let i = 0; i < count; i++) {
            const size = reply.readInt32BE(at);
            at += 4;
            if (size < 0) row[i] = null;
            else {
              row[i] = types.parseType(reply.toString("utf8", at, at + size), fields[i]!.dataTypeID, parsers);
              at += size;
            }
          }
          rows.push(row);
        } else {
          const row: Record<string, unknown> = {};
          for (let i = 0; i < count; i++) {
            const size = reply.readInt32BE(at);
            at += 4;
            let value: unknown = null;
            if (size >= 0) {
              value = types.parseType(reply.toString("utf8", at, at + size), fields[i]!.dataTypeID, parsers);
              at += size;
            }
            const name = fields[i]!.name;
            // As Object.fromEntries: a column named __proto__ is an own property, not the prototype.
            if (name === "__proto__") Object.defineProperty(row, name, { value, writable: true, enumerable: true, configurable: true });
            else row[name] = value;
          }
          rows.push(row);
        }
        break;
      }
      case 0x54: {
        // RowDescription
        const count = reply.readInt16BE(start);
        fields = new Array(count);
        let at = start + 2;
        for (let i = 0; i < count; i++) {
          const nul = reply.indexOf(0, at);
          const name = reply.toString("utf8", at, nul);
          fields[i] = { name, dataTypeID: reply.readInt32BE(nul + 7) };
          at = nul + 19;
        }
        break;
      }
      case 0x43: {
        // CommandComplete: a tag that carries a row count ends in it ("SELECT 2", "INSERT 0 5").
        const parts = reply.toString("utf8", start, end - 1).split(" ");
        const command = parts[0]!;
        const rowCount = parseInt(parts[parts.length - 1]!, 10);
        if (["INSERT", "UPDATE", "DELETE", "COPY", "MERGE"].includes(command)) affectedRows += rowCount;
        result = { rows, fields, command, affectedRows } as Results<unknown>;
        if (!Number.isNaN(rowCount)) (result as { rowCount?: number }).rowCount = rowCount;
        rows = [];
        fields = [];
        break;
      }
      case 0x45: // ErrorResponse
        error = ownMessage(reply.subarray(offset - length - 1, end)) as unknown as Error;
        break;
      case 0x4e: // NoticeResponse
        if (options?.onNotice) options.onNotice(ownMessage(reply.subarray(offset - length - 1, end)) as Parameters<NonNullable<QueryOptions["onNotice"]>>[0]);
        break;
      case 0x41: {
        // NotificationResponse: process id, channel, payload.
        const nul = reply.indexOf(0, start + 4);
        notifications.push({ channel: reply.toString("utf8", start + 4, nul), payload: reply.toString("utf8", nul + 1, end - 1) });
        break;
      }
      case 0x32: // BindComplete
      case 0x31: // ParseComplete
      case 0x33: // CloseComplete
      case 0x6e: // NoData
      case 0x49: // EmptyQueryResponse
      case 0x73: // PortalSuspended
      case 0x5a: // ReadyForQuery
      case 0x53: // ParameterStatus
        break;
      default: {
        // Anything else (COPY's messages): as PGlite, an error if its parser makes one, else not part of the result.
        const message = ownMessage(reply.subarray(offset - length - 1, end));
        if (message instanceof messages.DatabaseError) error = message;
      }
    }
  }
  return { result: result ?? ({ affectedRows: 0, rows: [], fields: [] } as Results<unknown>), error, notifications };
}

/** One message as PGlite's own parser reads it (errors, notices, anything unexpected). */
function ownMessage(bytes: Uint8Array): BackendMessage {
  let message: BackendMessage | undefined;
  new protocol.Parser().parse(bytes.slice(), (parsed) => (message = parsed));
  return message!;
}
