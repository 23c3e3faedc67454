/** Resolves once `condition` holds, polling real time (for specs of real processes); fails naming `what`. */
export async function until(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  for (let waited = 0; !condition(); waited += 50) {
    if (waited > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
