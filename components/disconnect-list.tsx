"use client";

import { useState, type ReactNode } from "react";
import { useAction } from "@/lib/web/use-action.ts";
import { Button, Card, ConfirmDialog, EmptyState, ErrorNotice, LoadingRows } from "./ui.tsx";

/**
 * A card listing things that hold access (agents, OAuth apps, sign-in accounts), each with a Disconnect button and
 * a confirmation: loading, error and empty states included. `disconnect` does the work; the card
 * closes the dialog once it resolves and shows what it threw otherwise.
 */
export function DisconnectList<T extends { id: string }>(props: {
  title: string;
  items: T[] | undefined;
  error: Error | undefined;
  reload: () => void;
  loadingLabel: string;
  empty: { title: string; body: ReactNode };
  testId: string;
  /** The row's text: name, badges, details. */
  describe: (item: T) => ReactNode;
  /** The item's name in the button's accessible label and the dialog's title. */
  name: (item: T) => string;
  confirmTitle: (item: T) => string;
  confirmLabel: string;
  confirmBody: ReactNode;
  disconnect: (item: T) => Promise<void>;
  /** The row button's text (default Disconnect). */
  actionLabel?: string;
  /** Below the list, whatever its state (e.g. ways to add one). */
  footer?: ReactNode;
}) {
  const action = props.actionLabel ?? "Disconnect";
  const [target, setTarget] = useState<T>();
  const { busy, error, run } = useAction();

  return (
    <>
      <Card title={props.title}>
        {props.error && !props.items ? (
          <ErrorNotice error={props.error} onRetry={props.reload} />
        ) : !props.items ? (
          <LoadingRows rows={1} height="h-14" label={props.loadingLabel} />
        ) : props.items.length === 0 ? (
          <EmptyState title={props.empty.title}>{props.empty.body}</EmptyState>
        ) : (
          <ul className="divide-y divide-slate-100" data-testid={props.testId}>
            {props.items.map((item) => (
              <li key={item.id} className="flex flex-wrap items-center gap-3 py-3">
                <div className="min-w-0 flex-1">{props.describe(item)}</div>
                <Button variant="ghost" onClick={() => setTarget(item)} aria-label={`${action} ${props.name(item)}`}>
                  {action}
                </Button>
              </li>
            ))}
          </ul>
        )}
        {props.footer}
      </Card>
      <ConfirmDialog
        open={target !== undefined}
        title={target ? props.confirmTitle(target) : ""}
        confirmLabel={props.confirmLabel}
        busy={busy}
        error={error}
        onClose={() => setTarget(undefined)}
        onConfirm={() =>
          run(async () => {
            await props.disconnect(target!);
            setTarget(undefined);
          })
        }
      >
        {props.confirmBody}
      </ConfirmDialog>
    </>
  );
}
