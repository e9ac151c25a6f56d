import type { Metadata } from "next";
import { MemoryPage } from "@/components/memory-page.tsx";

export const metadata: Metadata = { title: "Memory" };

export default async function Page({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  return <MemoryPage id={id} />;
}
