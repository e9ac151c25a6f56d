import { Readable } from "node:stream";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";

/**
 * The embedded store; objects whose keys are in `trickling` come a byte every 100 ms, for ever (a
 * download that holds the documents' turn), counting their reads, closed streams and heads.
 */
export class TricklingStore extends LocalBlobStore {
  readonly trickling = new Set<string>();
  reads = 0;
  closed = 0;
  heads = 0;
  /** How long the head of a trickling object takes to answer. */
  headMs = 0;
  override async head(key: string) {
    if (this.trickling.has(key)) {
      this.heads += 1;
      await new Promise((resolve) => setTimeout(resolve, this.headMs));
    }
    return super.head(key);
  }
  override async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    if (!this.trickling.has(key)) return super.read(key, range);
    this.reads += 1;
    let timer: NodeJS.Timeout | undefined;
    const stream = new Readable({
      read() {
        timer = setTimeout(() => stream.push(Buffer.from("a")), 100);
      },
      destroy: (error, callback) => {
        clearTimeout(timer);
        this.closed += 1;
        callback(error);
      },
    });
    return stream;
  }
}
