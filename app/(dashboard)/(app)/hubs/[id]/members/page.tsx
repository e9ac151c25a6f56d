import type { Metadata } from "next";
import { HubMembers } from "@/components/hub-members.tsx";

export const metadata: Metadata = { title: "Members" };

export default function MembersPage() {
  return <HubMembers />;
}
