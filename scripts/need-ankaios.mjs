// npm run test:ankaios needs the released Ankaios: says how to get it when ANKAIOS_BIN does not have it.
import { accessSync, constants } from 'node:fs';
import path from 'node:path';

const folder = process.env.ANKAIOS_BIN;
const missing = folder
  ? ['ank-server', 'ank', 'ank-agent'].filter((name) => {
      try {
        accessSync(path.join(folder, name), constants.X_OK);
        return false;
      } catch {
        return true;
      }
    })
  : ['ank-server', 'ank', 'ank-agent'];
if (missing.length > 0) {
  process.stderr.write(`test:ankaios runs our agent under the released Ankaios and needs its binaries: ${missing.join(', ')} ${folder ? `not found (executable) in ANKAIOS_BIN='${folder}'` : '(ANKAIOS_BIN is not set)'}.
Set ANKAIOS_BIN to a folder holding ank-server, ank and ank-agent of Ankaios v1.0.1 (the release's own binaries), e.g.
  ANKAIOS_BIN=/usr/local/bin npm run test:ankaios
`);
  process.exit(1);
}
