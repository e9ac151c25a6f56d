"use client";

import type { GateOption } from "@/lib/web/types.ts";
import { Button } from "./ui.tsx";

/**
 * An open decision gate's options as buttons, and Dismiss. `onChoose` gets the option's id, or
 * "dismiss": the bell passes that on as its resolve action, the board turns it into its own.
 */
export function GateChoices({ options, onChoose, busy }: { options: GateOption[]; onChoose: (action: string) => void; busy?: boolean }) {
  return (
    <div className="mt-2 flex flex-wrap gap-1">
      {options.map((option) => (
        <Button key={option.id} variant="primary" busy={busy} onClick={() => onChoose(option.id)}>
          {option.label}
        </Button>
      ))}
      <Button variant="ghost" disabled={busy} onClick={() => onChoose("dismiss")}>
        Dismiss
      </Button>
    </div>
  );
}
