/** Semver compatibility: equal majors and, while the major is 0, equal minors too. */
export function compatibleVersions(ours: string, theirs: string): boolean {
  const parse = (v: string) => /^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(v.trim());
  const a = parse(ours),
    b = parse(theirs);
  if (!a || !b) return false;
  return a[1] === b[1] && (a[1] !== '0' || a[2] === b[2]);
}
