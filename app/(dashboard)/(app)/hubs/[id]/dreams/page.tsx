import type { Metadata } from "next";
import { HubDreams } from "@/components/hub-dreams.tsx";

export const metadata: Metadata = { title: "Dreams" };

export default function DreamsPage() {
  return <HubDreams />;
}
