/** The greeting line of a hub's header (Memax SDK HubSummaryHeader), derived from its state and the caller's local time. */

export type HeaderState = "first_time" | "review_needed" | "dream_deltas" | "inbox_overflow" | "return_after_absence" | "team_activity" | "clean";
export type TimeBucket = "deep-night" | "morning" | "noon" | "afternoon" | "evening" | "late-night";

/** More unassigned memories than this and the header nudges to organise them. */
export const INBOX_OVERFLOW = 25;
/** Away longer than this and the header says welcome back. */
export const ABSENCE_MS = 7 * 24 * 60 * 60 * 1000;

/** The hour in `timeZone` (IANA name); UTC when absent or unknown. */
export function localHour(now: Date, timeZone: string | undefined): number {
  try {
    const hour = new Intl.DateTimeFormat("en-US", { hour: "numeric", hourCycle: "h23", timeZone: timeZone || "UTC" }).format(now);
    return Number(hour) % 24;
  } catch {
    return now.getUTCHours();
  }
}

export function timeBucket(hour: number): TimeBucket {
  if (hour < 5) return "deep-night";
  if (hour < 11) return "morning";
  if (hour < 14) return "noon";
  if (hour < 18) return "afternoon";
  if (hour < 22) return "evening";
  return "late-night";
}

function cleanGreeting(bucket: TimeBucket): string {
  switch (bucket) {
    case "morning":
      return "morningClean";
    case "noon":
      return "timeNoon";
    case "afternoon":
      return "afternoonClean";
    case "evening":
      return "timeEvening";
    default:
      return "deepNightClean";
  }
}

export interface HeaderInput {
  memories: number;
  inbox: number;
  hubType: string;
  lastVisitedAt: Date | null;
  /** Memories other members pushed since the caller's last visit. */
  teamActivity: number;
  userName: string;
  now: Date;
  timeZone?: string;
}

export function hubHeader(input: HeaderInput) {
  const bucket = timeBucket(localHour(input.now, input.timeZone));
  const away = input.lastVisitedAt !== null && input.now.getTime() - input.lastVisitedAt.getTime() > ABSENCE_MS;
  let state: HeaderState;
  let greeting: string;
  const params: Record<string, string> = { name: input.userName.split(/\s+/)[0] ?? "" };
  if (input.memories === 0) {
    state = "first_time";
    greeting = "firstTime";
  } else if (away) {
    state = "return_after_absence";
    greeting = "returnAfterAbsence";
  } else if (input.hubType === "team" && input.teamActivity > 0) {
    state = "team_activity";
    greeting = bucket === "morning" ? "teamMorning" : cleanGreeting(bucket);
    params.count = String(input.teamActivity);
  } else if (input.inbox > INBOX_OVERFLOW) {
    state = "inbox_overflow";
    greeting = "inboxOverflow";
    params.count = String(input.inbox);
  } else {
    state = "clean";
    greeting = cleanGreeting(bucket);
  }
  // A and B alternate by day, so the line varies without flickering between requests.
  const variant = Math.floor(input.now.getTime() / 86_400_000) % 2 === 0 ? "A" : "B";
  return { state, greeting_key: `${greeting}${variant}`, greeting_params: params, time_bucket: bucket };
}
