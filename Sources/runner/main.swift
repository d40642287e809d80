import Foundation
import Glibc
import RunnerKit

/// Two malloc arenas instead of glibc's eight per core: the runner's threads (the HTTP client's,
/// the record writer's, the concurrency pool's) otherwise each grow an arena of their own, which
/// raised the peak memory of long batches by a third with no gain in speed (measured with
/// Tests/Benchmarks/memory.sh and compare.sh). An explicit MALLOC_ARENA_MAX still wins.
/// (`mallopt` is looked up at run time: the Glibc module does not import <malloc.h>.)
func limitMallocArenas() {
    let arenaMax: Int32 = -8  // M_ARENA_MAX
    guard ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil,
        let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt")  // RTLD_DEFAULT
    else { return }
    let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
    _ = mallopt(arenaMax, 2)
}

/// A password in a queue URL given on the command line (`--queue postgresql://u:PW@h/db`) is
/// overwritten with `*` where the kernel shows the arguments (`ps`, /proc/PID/cmdline) once the
/// runner holds its own copy, as MySQL's client does. It was visible for the moment before:
/// docs/queue.md recommends ~/.pgpass or $RUNNER_QUEUE.
func hideQueuePasswords(in arguments: [String]) {
    for (index, argument) in arguments.enumerated() where argument.contains("://") {
        guard let range = PostgresConnection.passwordBytes(in: argument), let pointer = CommandLine.unsafeArgv[index],
            strlen(pointer) == argument.utf8.count
        else { continue }
        for offset in range { pointer[offset] = CChar(bitPattern: UInt8(ascii: "*")) }
    }
}

limitMallocArenas()
let arguments = CommandLine.arguments
hideQueuePasswords(in: arguments)
// A closed stdout (`runner run --json | head -1`) ends the printing, not the run: writes to it
// fail with EPIPE instead of killing the process, and Console stops writing there.
signal(SIGPIPE, SIG_IGN)
exit(await Runner.main(Array(arguments.dropFirst())))
