// What a runtime CLI's failure says, in its last words. Podman and nerdctl log as logrus does
// (`time="…" level=… msg="…"`): Podman writes each of its own tries as a warning before its error (`Error: …`),
// nerdctl its steps as info and warnings before a `level=fatal` line; the error alone says why, and without
// its timestamp the same failure reads the same each time. Pure.

export function lastWords(message: string): string {
  const last = message
    .split('\n')
    .filter((line) => line.trim() !== '' && !/^time="[^"]*" level=(warning|info|debug)/.test(line))
    .at(-1);
  const logged = last === undefined ? undefined : /^time="[^"]*" level=\w+ msg="((?:[^"\\]|\\.)*)"/.exec(last);
  const said = logged ? logged[1].replace(/\\(.)/g, '$1') : (last ?? message);
  return said.replace(/^Error: /, '');
}
