import type { Metadata } from "next";
import { HubBoards } from "@/components/hub-boards.tsx";

export const metadata: Metadata = { title: "Boards" };

export default function BoardsPage() {
  return <HubBoards />;
}
