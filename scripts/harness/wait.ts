/** Resolves once `condition` holds (it may answer asynchronously), checking every 50 ms; rejects after `timeoutMs`. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  for (let waited = 0; !(await condition()); waited += 50) {
    if (waited > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
