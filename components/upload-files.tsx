"use client";

import { useRef, useState } from "react";
import { api, ApiClientError } from "@/lib/web/api.ts";
import type { Memory } from "@/lib/web/types.ts";

/** Types the server accepts (docs/files.md); the picker offers these, the server checks the bytes. */
const ACCEPT = ".pdf,.docx,.html,.htm,.txt,.md,.markdown,.csv,.json,.png,.jpg,.jpeg,.webp,.gif";
const TYPE_BY_EXTENSION: Record<string, string> = {
  pdf: "application/pdf",
  docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  html: "text/html",
  htm: "text/html",
  txt: "text/plain",
  md: "text/markdown",
  markdown: "text/markdown",
  csv: "text/csv",
  json: "application/json",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
};

interface UploadIntent {
  object_key: string;
  upload_url: string;
  headers: Record<string, string>;
  file_ref: { object_key: string; filename: string; content_type: string; size_bytes: number };
}

interface Row {
  key: string;
  name: string;
  progress: number;
  status: "uploading" | "saving" | "done" | "error";
  error?: string;
  memory?: Memory;
}

/** The browser's type when it knows one, else the extension's; the server sniffs the real type anyway. */
function typeOf(file: File): string {
  const extension = file.name.split(".").pop()?.toLowerCase() ?? "";
  return TYPE_BY_EXTENSION[extension] ?? (file.type || "application/octet-stream");
}

/** PUT with progress events (fetch has none for uploads). */
function putWithProgress(intent: UploadIntent, file: File, onProgress: (fraction: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", intent.upload_url);
    for (const [name, value] of Object.entries(intent.headers)) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (event) => event.lengthComputable && onProgress(event.loaded / event.total);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let message = `Upload failed (HTTP ${xhr.status})`;
      try {
        message = (JSON.parse(xhr.responseText) as { error?: { message?: string } }).error?.message ?? message;
      } catch {
        // not JSON (an S3 error document)
      }
      reject(new Error(message));
    };
    xhr.onerror = () => reject(new Error("The upload was interrupted"));
    xhr.send(file);
  });
}

/** Drop or pick files: each is uploaded with its own progress bar, then becomes a memory of this hub. */
export function UploadFiles({ hubId, onUploaded, disabled }: { hubId: string; onUploaded: (memory: Memory) => void; disabled?: boolean }) {
  const [rows, setRows] = useState<Row[]>([]);
  const [over, setOver] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const update = (key: string, change: Partial<Row>) => setRows((all) => all.map((row) => (row.key === key ? { ...row, ...change } : row)));

  async function uploadOne(file: File, key: string) {
    try {
      const contentType = typeOf(file);
      const intent = await api<UploadIntent>("/v1/uploads", {
        method: "POST",
        hubId,
        body: { filename: file.name, content_type: contentType, size_bytes: file.size, purpose: "memory_attachment" },
      });
      await putWithProgress(intent, file, (fraction) => update(key, { progress: Math.round(fraction * 100) }));
      update(key, { progress: 100, status: "saving" });
      const memory = await api<Memory>("/v1/memories", { method: "POST", hubId, body: { file_ref: intent.file_ref, source: "web", initiation_type: "human_direct" } });
      update(key, { status: "done", memory });
      onUploaded(memory);
    } catch (error) {
      update(key, { status: "error", error: error instanceof ApiClientError || error instanceof Error ? error.message : String(error) });
    }
  }

  function start(files: FileList | null) {
    if (!files?.length) return;
    const added = [...files].map((file, i) => ({ file, row: { key: `${Date.now()}-${i}-${file.name}`, name: file.name, progress: 0, status: "uploading" as const } }));
    setRows((all) => [...added.map((a) => a.row), ...all].slice(0, 20));
    for (const { file, row } of added) void uploadOne(file, row.key);
  }

  return (
    <section aria-labelledby="upload-heading" className="flex flex-col gap-2">
      <div
        onDragOver={(event) => {
          event.preventDefault();
          if (!disabled) setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={(event) => {
          event.preventDefault();
          setOver(false);
          if (!disabled) start(event.dataTransfer.files);
        }}
        className={`flex flex-wrap items-center justify-between gap-3 rounded-lg border-2 border-dashed px-4 py-3 text-sm ${over ? "border-sky-500 bg-sky-50" : "border-slate-300 bg-white"}`}
      >
        <div>
          <h2 id="upload-heading" className="font-semibold">
            Add files
          </h2>
          <p className="text-slate-600">Drop PDF, Word, HTML, text, CSV, JSON or images here (up to 25 MiB each). Their text becomes searchable.</p>
        </div>
        <label className={`cursor-pointer rounded-md border border-slate-300 px-3 py-1.5 font-medium hover:bg-slate-50 ${disabled ? "pointer-events-none opacity-50" : ""}`}>
          Choose files
          <input
            ref={input}
            type="file"
            multiple
            accept={ACCEPT}
            disabled={disabled}
            className="sr-only"
            aria-label="Choose files to upload"
            onChange={(event) => {
              start(event.target.files);
              if (input.current) input.current.value = "";
            }}
          />
        </label>
      </div>
      {rows.length > 0 && (
        <ul className="flex flex-col gap-1" aria-label="Uploads">
          {rows.map((row) => (
            <li key={row.key} className="flex items-center gap-3 rounded-md border border-slate-200 bg-white px-3 py-2 text-sm">
              <span className="min-w-0 flex-1 truncate" title={row.name}>
                {row.name}
              </span>
              {row.status === "uploading" && <progress className="h-2 w-32" max={100} value={row.progress} aria-label={`Uploading ${row.name}`} />}
              <span className={`shrink-0 text-xs ${row.status === "error" ? "text-red-700" : "text-slate-600"}`}>
                {row.status === "uploading"
                  ? `${row.progress}%`
                  : row.status === "saving"
                    ? "saving…"
                    : row.status === "done"
                      ? "uploaded — reading its text…"
                      : row.error}
              </span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
