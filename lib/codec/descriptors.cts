// protobuf-es's descriptors of the three .proto files, built on first use: building them cost the start ~18 ms
// of CPU, and the agent's frequent messages are read and written by hand (lib/codec/hello.ts, state-updates.ts,
// workload-states.ts, workload-updates.ts, log-entries.ts).
// CommonJS, so that they load synchronously, bundled or not: by module.require(), Node's own (the require() Node
// gives a CommonJS module that an ES module imported through loader hooks, as tsx's, cannot load an ES module);
// the bundle makes it require() (scripts/bundle.mjs), which esbuild bundles and runs only when it is called.
import type * as AnkBase from '../../proto/gen/ank_base_pb.js';
import type * as ControlApi from '../../proto/gen/control_api_pb.js';
import type * as GrpcApi from '../../proto/gen/grpc_api_pb.js';

let base: typeof AnkBase | undefined;
let grpc: typeof GrpcApi | undefined;
let control: typeof ControlApi | undefined;

/** ank_base.proto's schemas and enums. */
export const ankBase = (): typeof AnkBase => (base ??= module.require('../../proto/gen/ank_base_pb.js'));
/** grpc_api.proto's. */
export const grpcApi = (): typeof GrpcApi => (grpc ??= module.require('../../proto/gen/grpc_api_pb.js'));
/** control_api.proto's. */
export const controlApi = (): typeof ControlApi => (control ??= module.require('../../proto/gen/control_api_pb.js'));
