/**
 * A bounded memo of a pure function of a short string: a busy gateway sees the same client
 * addresses and paths again and again, and parsing them was most of a multi-rule request's cost.
 * Forgets every answer once it holds `size` of them (so memory stays bounded whatever clients
 * send); keys longer than `maxKeyLength` are not kept at all.
 */
export function memoize<T>(
  compute: (key: string) => T,
  { size, maxKeyLength }: { size: number; maxKeyLength: number },
): (key: string) => T {
  const answers = new Map<string, T>();
  return (key) => {
    const known = answers.get(key);
    if (known !== undefined || answers.has(key)) return known as T;
    const answer = compute(key);
    if (key.length <= maxKeyLength) {
      if (answers.size >= size) answers.clear();
      answers.set(key, answer);
    }
    return answer;
  };
}
