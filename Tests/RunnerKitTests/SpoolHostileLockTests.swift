import Foundation
import Glibc
@testable import RunnerKit
import Testing

/// Key locks that cannot be taken as asked: never taken as "no lock".
@Suite(.timeLimit(.minutes(1)))
struct SpoolHostileLockTests {
    /// Out of descriptors (EMFILE): the lock is unavailable, and the engine fails the job
    /// without running it, instead of running it unlocked.
    @Test func aKeyLockThatCannotBeOpenedFailsTheJobAndNeverRunsIt() async throws {
        let folder = TemporaryFolder()
        let spool = Spool(root: folder.path + "/spool")
        try spool.makeFolders()
        let exhausted = SpoolKeyLock(folder: spool.locks, openFile: { _, _, _, _ in
            errno = EMFILE
            return -1
        })
        guard case .unavailable(let reason) = exhausted.lock(key: "probe:k") else {
            Issue.record("a lock that cannot be opened must be unavailable")
            return
        }
        #expect(reason.contains("Too many open files"), "\(reason)")
        #expect(exhausted.lock(key: "probe:k").release == nil)

        let store = try OutputStore(root: folder.path + "/out")
        let ran = RunCounter()
        let engine = try JobEngine(configuration: .init(store: store, http: UnusedFetcher()).with { $0.keyLock = exhausted })
        let result = await engine.run(JobDescriptor(CountingKind(counter: ran), key: "probe:k", url: URL(string: "http://127.0.0.1/x")!))
        #expect(result.status == .failed)
        #expect(result.error?.contains("could not be taken") == true, "\(result.error ?? "")")
        #expect(ran.value == 0, "the job never ran")
    }

    /// A directory, a FIFO or a link where the lock file should be: removed, and the lock taken.
    @Test(arguments: ["folder", "fifo", "link"])
    func somethingPlantedAtALocksNameIsRemovedAndTheLockTaken(kind: String) throws {
        let folder = TemporaryFolder()
        let spool = Spool(root: folder.path + "/spool")
        try spool.makeFolders()
        let path = "\(spool.locks)/\(OutputStore.fileName(forKey: "k"))"
        let victim = folder.write("victim", "precious")
        switch kind {
        case "folder": mkdir(path, 0o700)
        case "fifo": mkfifo(path, 0o600)
        default: symlink(victim, path)
        }
        let lock = SpoolKeyLock(spool: spool)
        let release = try #require(lock.lock(key: "k").release)
        #expect(FileSystem.entry(path)?.type == .regular)
        #expect(lock.held().map(\.key) == ["k"])
        release()
        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == "precious")
    }
}

private final class RunCounter: Sendable {
    private let count = Locked(0)
    var value: Int { count.value }
    func add() { count.withLock { $0 += 1 } }
}

private struct CountingKind: JobKind {
    static let name = "probe"
    static let summary = "Counts its runs."
    static let parameters: [KindParameter] = []
    let counter: RunCounter

    init(counter: RunCounter) { self.counter = counter }
    init(fields: inout JobFields) throws(JobSpecError) { counter = RunCounter() }

    func run(in context: JobContext) async throws -> KindOutcome {
        counter.add()
        return KindOutcome(.bytes([], httpStatus: 200), folder: "probes", fileExtension: "txt")
    }
}

private struct UnusedFetcher: HTTPFetching {
    struct Unused: Error {}
    func fetch(_ request: FetchRequest, into body: any BodySink) async throws -> FetchResponseHead { throw Unused() }
}
