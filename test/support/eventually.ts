/** The first successful result of `call` within a few attempts (a reconnect may still be under way). */
export async function eventually<T>(call: () => Promise<T>, attempts = 20, pauseMs = 100): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await call();
    } catch (err) {
      if (i === attempts) throw err;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
}
