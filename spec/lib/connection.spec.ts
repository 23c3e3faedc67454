import { expect } from 'chai';
import { LINE_0_8, LINE_1, PROTOCOL_LINES } from '../../lib/codec/lines.js';
import { NOT_CONNECTED, nextConnection } from '../../lib/control-interface/connection.js';

describe('the server connection as the agent keeps it', () => {
  it('is offline with every protocol line until a server accepts the agent', () => {
    expect(NOT_CONNECTED).to.deep.equal({ online: false, lines: PROTOCOL_LINES });
  });

  it("a connection brings its server's lines; when it goes, the lines stay and only online changes", () => {
    const up = nextConnection(NOT_CONNECTED, { kind: 'connected', lines: [LINE_0_8] });
    expect(up).to.deep.equal({ online: true, lines: [LINE_0_8] });
    expect(nextConnection(up, { kind: 'disconnected' })).to.deep.equal({ online: false, lines: [LINE_0_8] });
    expect(nextConnection(up, { kind: 'connected', lines: [LINE_1] })).to.deep.equal({ online: true, lines: [LINE_1] });
  });

  it('other messages leave the connection as it is (the same object, so nobody is told of a change)', () => {
    const up = nextConnection(NOT_CONNECTED, { kind: 'connected', lines: [LINE_1] });
    expect(nextConnection(up, { kind: 'updateWorkloadState', states: [] })).to.equal(up);
    expect(nextConnection(up, { kind: 'logsCancelRequest', requestId: 'r' })).to.equal(up);
  });
});
