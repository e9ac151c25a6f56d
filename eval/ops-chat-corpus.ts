/**
 * A held-apart eval corpus from another domain: customer-support chat transcripts of a
 * smart-home device maker (six products, eight kinds of problem), generated deterministically
 * from the tables below. Nothing in recall was fitted on it.
 *
 * The transcripts describe a problem in the customer's words; the queries ask in other words
 * (paraphrase), by error code (identifier), by product + problem, or in Chinese about English
 * transcripts and the reverse (cross-language). Grades: 3 = the transcript about that product and
 * problem, 2 = the same problem on another product when the query names no product, 1 = the
 * same product's other transcript of the problem's family. Near-miss traps: for a query naming a
 * product, the transcripts of the same problem on other products (they would mislead).
 */
import type { GradedQuery } from "./scifact.ts";

export interface OpsDoc {
  key: string;
  content: string;
}

export interface OpsQuery extends GradedQuery {
  category: "paraphrase" | "identifier" | "named" | "cross-language" | "cross-language, new wording";
  harmful: string[];
}

const PRODUCTS = [
  { name: "Nimbus thermostat", short: "Nimbus", part: "base plate", zh: "Nimbus 温控器" },
  { name: "Aero air purifier", short: "Aero", part: "filter cartridge", zh: "Aero 空气净化器" },
  { name: "Vela smart lock", short: "Vela", part: "keypad module", zh: "Vela 智能门锁" },
  { name: "Orbit robot vacuum", short: "Orbit", part: "charging dock", zh: "Orbit 扫地机器人" },
  { name: "Lumen light strip", short: "Lumen", part: "controller box", zh: "Lumen 灯带" },
  { name: "Tidal boiler controller", short: "Tidal", part: "relay board", zh: "Tidal 锅炉控制器" },
];

interface Problem {
  key: string;
  family: "connectivity" | "power" | "software" | "hardware" | "account";
  /** How customers describe it in the transcripts (one is picked per product). */
  said: string[];
  /** How someone searching later asks about it: never the transcript's own words. */
  asked: string[];
  /** The same question in Chinese. */
  zh: string;
  cause: (part: string) => string;
  fix: (part: string) => string;
}

const PROBLEMS: Problem[] = [
  {
    key: "wifi",
    family: "connectivity",
    said: ["it keeps dropping off the wifi every few hours", "it loses its wireless connection overnight and shows offline in the morning", "the thing disconnects from my router all the time"],
    asked: ["device repeatedly goes offline from the home network", "unit cannot stay connected to the internet"],
    zh: "设备经常断开无线网络连接",
    cause: (part) => `The ${part} was on the crowded 2.4 GHz channel 11 and the router's band steering kept kicking it off.`,
    fix: () => "Pin the router to channel 1 or 6, turn off band steering for the IoT network, then power cycle the unit.",
  },
  {
    key: "battery",
    family: "power",
    said: ["the batteries are flat after two days", "battery died again even though I changed them last week", "it eats through a set of AA cells every few days"],
    asked: ["power runs out far too quickly", "why does it need new cells so often"],
    zh: "电池电量消耗太快",
    cause: (part) => `Debug logging was left on after the last support session, so the ${part} never went into deep sleep.`,
    fix: () => "Disable diagnostic logging under Settings, Advanced, then fit fresh lithium cells; expect six months of life again.",
  },
  {
    key: "update",
    family: "software",
    said: ["the firmware update is stuck at 40 percent", "the upgrade has been spinning at the same percentage since last night", "installing the new software version never finishes"],
    asked: ["upgrade hangs halfway through", "new version fails to install and freezes"],
    zh: "固件升级卡住不动",
    cause: (part) => `The download was interrupted and the ${part} kept retrying a corrupt image.`,
    fix: () => "Hold the reset button for ten seconds to roll back to the previous image, then start the update again from the app on a stable connection.",
  },
  {
    key: "pairing",
    family: "connectivity",
    said: ["the app can't find it during setup", "the Homebase app says no device found when I try to add it", "setup fails at the add device screen"],
    asked: ["pairing does not work when adding it in the phone application", "phone app will not discover the new unit"],
    zh: "手机应用无法配对设备",
    cause: () => "Bluetooth permission for the Homebase app was denied, so discovery never started.",
    fix: () => "Grant the app Bluetooth and nearby devices permission, keep the phone within two metres and retry the add device flow.",
  },
  {
    key: "schedule",
    family: "software",
    said: ["it ignores the schedule I set", "the weekly programme does nothing, it just runs whenever it wants", "my timers are not being followed"],
    asked: ["does not follow the programmed timetable", "automation times are not respected"],
    zh: "设备不按设定的时间表运行",
    cause: () => "The home's time zone was still UTC after the move, so every timer fired hours off.",
    fix: () => "Set the home location and time zone in the app, then re-save each schedule so it is stored with the right offset.",
  },
  {
    key: "noise",
    family: "hardware",
    said: ["it makes a loud clicking noise", "there is a buzzing sound coming from it at night", "it started making a grinding racket"],
    asked: ["strange rattling sound from the unit", "unit is noisy and disturbs sleep"],
    zh: "设备发出奇怪的噪音",
    cause: (part) => `The ${part} had come loose from its mounting clips and vibrated against the housing.`,
    fix: (part) => `Reseat the ${part}, tighten the two mounting screws and add the rubber spacer from the accessory bag.`,
  },
  {
    key: "billing",
    family: "account",
    said: ["I was charged twice for the subscription this month", "my card shows two payments for the premium plan", "you billed me double"],
    asked: ["double billing on my plan", "duplicate payment taken for the monthly membership"],
    zh: "订阅被重复扣费",
    cause: () => "The plan was bought once in the app store and once on the website, so two subscriptions were active.",
    fix: () => "Cancel the app store subscription; the duplicate website charge is refunded to the card within five working days.",
  },
  {
    key: "reset",
    family: "hardware",
    said: ["how do I wipe it back to factory settings", "I'm selling it and need to erase everything", "I want to start over from scratch with it"],
    asked: ["restore the default configuration", "clear all data before giving it away"],
    zh: "如何恢复出厂设置",
    cause: () => "Customer wanted a full erase before handing the device to a new owner.",
    fix: (part) => `Remove it from the home in the app first, then hold the button on the ${part} for twenty seconds until the light blinks white.`,
  },
];

const AGENTS = ["Priya", "Tomasz", "Ines", "Kwame", "Sofia", "Daniel"];
const OPENERS = ["hi there", "hello, hoping you can help", "hey support", "good morning", "hi, quick question", "hello again"];

function errorCode(productIdx: number, problemIdx: number): string {
  return `E-${productIdx + 2}${(problemIdx * 7 + productIdx * 3) % 10}${problemIdx + 1}`;
}

function transcript(productIdx: number, problemIdx: number): string {
  const product = PRODUCTS[productIdx]!;
  const problem = PROBLEMS[problemIdx]!;
  const n = productIdx * PROBLEMS.length + problemIdx;
  const agent = AGENTS[n % AGENTS.length]!;
  const ticket = 40_000 + n * 37;
  const said = problem.said[n % problem.said.length]!;
  const code = errorCode(productIdx, problemIdx);
  const hh = String(8 + (n % 10)).padStart(2, "0");
  return [
    `Support chat #${ticket}: ${product.name}`,
    "",
    `[${hh}:02] customer: ${OPENERS[n % OPENERS.length]}, my ${product.name} — ${said}.`,
    `[${hh}:03] ${agent}: sorry to hear that. Which firmware version does the app show, and is there an error code on the screen?`,
    `[${hh}:05] customer: version 3.${n % 9}.${(n * 5) % 11}, and the log shows ${code}.`,
    `[${hh}:07] ${agent}: thanks. ${code} on the ${product.short} means: ${problem.cause(product.part)}`,
    `[${hh}:08] ${agent}: ${problem.fix(product.part)}`,
    `[${hh}:15] customer: that did it, thank you!`,
    `[${hh}:16] ${agent}: great, closing ticket ${ticket}. Have a good day.`,
  ].join("\n");
}

// Chinese transcripts for two combinations: English queries must find them.
const CHINESE: { product: number; problem: number; content: string }[] = [
  {
    product: 0,
    problem: 7,
    content:
      "客服对话 #51001：Nimbus 温控器\n\n[10:02] 客户：你好，我要把 Nimbus 温控器卖掉，怎么恢复出厂设置，清除所有数据？\n[10:04] 客服 Ines：请先在应用里把设备从家庭中移除，然后按住底座上的按钮二十秒，直到指示灯闪白色。\n[10:09] 客户：好了，谢谢！",
  },
  {
    product: 3,
    problem: 2,
    content:
      "客服对话 #51002：Orbit 扫地机器人\n\n[14:20] 客户：Orbit 扫地机器人的固件升级一直卡在百分之四十，一晚上都没有完成。\n[14:22] 客服 Kwame：下载中断了，充电座一直在重试损坏的镜像。请按住重置按钮十秒回滚到旧版本，然后在稳定的网络下重新升级。\n[14:30] 客户：升级成功了，谢谢。",
  },
];

/** Support chats about other things, so that every query has unrelated company. */
const OTHER_TOPICS = [
  "where is my order, the tracking number has not updated for a week",
  "can I change the delivery address after ordering",
  "do you ship to Norway and how much is customs",
  "the box arrived damaged but the device seems fine",
  "is there a student discount on the premium plan",
  "how do I share access with my partner's phone",
  "what colour options does the new model come in",
  "can I use it with a voice assistant",
  "the manual in the box is in the wrong language",
  "I forgot the password for my Homebase account",
  "how long is the warranty and does it cover accidental damage",
  "is my data sold to third parties",
];

export function buildOpsChatCorpus(): { docs: OpsDoc[]; queries: OpsQuery[] } {
  const docs: OpsDoc[] = [];
  const key = (p: number, q: number) => `${PRODUCTS[p]!.short.toLowerCase()}-${PROBLEMS[q]!.key}`;
  for (let p = 0; p < PRODUCTS.length; p++) {
    for (let q = 0; q < PROBLEMS.length; q++) {
      const chinese = CHINESE.find((c) => c.product === p && c.problem === q);
      docs.push({ key: key(p, q), content: chinese ? chinese.content : transcript(p, q) });
    }
  }
  OTHER_TOPICS.forEach((topic, i) => {
    const agent = AGENTS[i % AGENTS.length]!;
    docs.push({
      key: `other-${i}`,
      content: `Support chat #${60_000 + i}\n\n[11:0${i % 10}] customer: ${OPENERS[i % OPENERS.length]}, ${topic}?\n[11:1${i % 10}] ${agent}: let me check that for you and follow up by e-mail today.`,
    });
  });

  const queries: OpsQuery[] = [];
  const sameProblem = (q: number, except?: number) => PRODUCTS.map((_, p) => p).filter((p) => p !== except).map((p) => key(p, q));
  const familyOf = (q: number) => PROBLEMS[q]!.family;
  for (let q = 0; q < PROBLEMS.length; q++) {
    const problem = PROBLEMS[q]!;
    // No product named: every product's transcript of that problem answers it.
    queries.push({
      id: `para-${problem.key}`,
      category: "paraphrase",
      text: problem.asked[0]!,
      relevant: Object.fromEntries(sameProblem(q).map((k) => [k, 2])),
      harmful: [],
    });
    // A product named: its transcript is the answer; the same problem on other products is a trap.
    for (const p of [q % PRODUCTS.length, (q + 3) % PRODUCTS.length]) {
      const product = PRODUCTS[p]!;
      const related = PROBLEMS.map((_, i) => i).filter((i) => i !== q && familyOf(i) === familyOf(q)).map((i) => [key(p, i), 1] as const);
      queries.push({
        id: `named-${product.short.toLowerCase()}-${problem.key}`,
        category: "named",
        text: `${product.name}: ${problem.asked[1]!}`,
        relevant: { [key(p, q)]: 3, ...Object.fromEntries(related) },
        harmful: sameProblem(q, p),
      });
    }
  }
  for (const [p, q] of [[1, 0], [2, 4], [4, 6], [5, 5], [3, 3]] as const) {
    queries.push({
      id: `code-${key(p, q)}`,
      category: "identifier",
      text: `what does error ${errorCode(p, q)} mean`,
      relevant: { [key(p, q)]: 3 },
      harmful: [],
    });
  }
  // Cross-language: Chinese questions about English transcripts, English questions about Chinese ones.
  for (const [p, q] of [[2, 1], [4, 0], [1, 6]] as const) {
    queries.push({
      id: `zh-en-${key(p, q)}`,
      category: "cross-language",
      text: `${PRODUCTS[p]!.zh}${PROBLEMS[q]!.zh}`,
      relevant: { [key(p, q)]: 3 },
      harmful: [],
    });
  }
  for (const chinese of CHINESE) {
    queries.push({
      id: `en-zh-${key(chinese.product, chinese.problem)}`,
      category: "cross-language",
      text: `${PRODUCTS[chinese.product]!.name}: ${PROBLEMS[chinese.problem]!.asked[0]!}`,
      relevant: { [key(chinese.product, chinese.problem)]: 3 },
      harmful: [],
    });
  }
  // Written on 2026-11-26 after the Chinese glosses (lib/ai/gloss-han.ts) were built, in a user's own
  // words rather than the problems' `zh` lines, and run only once the rules were settled: a check
  // that the glosses were not shaped by the five questions above.
  const NEW_WORDING: [number, number, string][] = [
    [5, 0, "Tidal 锅炉控制器老是掉线，连不上家里的路由器"],
    [0, 1, "Nimbus 温控器的电池两天就没电了"],
    [3, 5, "Orbit 扫地机器人晚上有很大的咔哒声"],
    [1, 4, "Aero 空气净化器不按照我设置的定时工作"],
    [2, 3, "Vela 智能门锁在手机 app 里添加不了，找不到设备"],
    [4, 6, "Lumen 灯带的会员每个月被收了两次钱"],
  ];
  for (const [p, q, text] of NEW_WORDING) {
    queries.push({ id: `zh-new-${key(p, q)}`, category: "cross-language, new wording", text, relevant: { [key(p, q)]: 3 }, harmful: [] });
  }
  return { docs, queries };
}
