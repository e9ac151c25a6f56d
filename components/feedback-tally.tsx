import type { CardFeedback } from "@/lib/web/types.ts";

/** How the members judged a board's answer ("2 accurate · 1 inaccurate"); nothing before anyone has. */
export function FeedbackTally({ feedback }: { feedback: CardFeedback | undefined }) {
  if (!feedback || feedback.accurate + feedback.inaccurate === 0) return null;
  const parts = [feedback.accurate > 0 && `${feedback.accurate} accurate`, feedback.inaccurate > 0 && `${feedback.inaccurate} inaccurate`].filter(Boolean);
  return <span data-testid="feedback-tally">{parts.join(" · ")}</span>;
}
