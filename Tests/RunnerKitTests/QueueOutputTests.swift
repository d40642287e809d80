import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// The watchers of a queue share one output folder: the first stamps it, the others must find
/// that stamp in their `--out`, or refuse to start naming the folder that is the queue's.
@Suite(.timeLimit(.minutes(1)))
struct QueueOutputTests {
    let folder = TemporaryFolder()

    func output(_ name: String) throws -> OutputStore { try OutputStore(root: folder.path + "/" + name) }

    func stamp(in name: String) throws -> JSONValue {
        try JSONParser.parse(Array(try #require(FileManager.default.contents(atPath: "\(folder.path)/\(name)/.runner-queue"))))
    }

    @Test func theFirstWatcherStampsItsFolderAndTheOthersMustShareIt() async throws {
        let queue = InMemoryQueueStore()
        let shared = try output("shared")

        // The first watcher stamps its folder and records it in the queue.
        try await QueueOutput.claim(shared, queue: queue, runner: "one")
        let identity = try await queue.identity()
        let stamp = try stamp(in: "shared")
        #expect(stamp["queue"]?.stringValue == identity.id && stamp["folder"]?.stringValue == identity.folder, "\(stamp) \(identity)")
        #expect(identity.output == shared.root && identity.stampedBy == "one")

        // Another watcher of the same folder (on another machine, under another path) starts.
        try await QueueOutput.claim(try OutputStore(root: folder.path + "/shared/"), queue: queue.connection(), runner: "two")

        // A watcher with a folder of its own is refused, told where the queue's output is.
        let own = try output("own")
        do {
            try await QueueOutput.claim(own, queue: queue.connection(), runner: "three")
            Issue.record("a second output folder was accepted")
        } catch {
            #expect(error.usage)
            #expect(error.message.contains(own.root) && error.message.contains(shared.root) && error.message.contains("stamped by one"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: own.root + "/.runner-queue"), "the refused folder is left unstamped")
    }

    @Test func aFolderStampedByAnotherQueueIsRefused() async throws {
        let shared = try output("shared")
        try await QueueOutput.claim(shared, queue: InMemoryQueueStore(), runner: "one")
        let other = InMemoryQueueStore()
        do {
            try await QueueOutput.claim(shared, queue: other, runner: "two")
            Issue.record("another queue's output was accepted")
        } catch {
            #expect(error.usage && error.message.contains("another queue") && error.message.contains(shared.root), "\(error)")
        }
        #expect(try await other.identity().folder == nil, "the other queue recorded no output")
    }

    @Test func twoWatchersStartingAtOnceOnOneFolderBothRunAndOneStampIsMade() async throws {
        let queue = InMemoryQueueStore()
        let root = folder.path + "/together"
        try await withThrowingTaskGroup(of: Void.self) { group in
            for runner in ["one", "two", "three", "four"] {
                group.addTask { try await QueueOutput.claim(try OutputStore(root: root), queue: queue.connection(), runner: runner) }
            }
            try await group.waitForAll()
        }
        #expect(try stamp(in: "together")["folder"]?.stringValue == (try await queue.identity().folder))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasPrefix(".tmp") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test func aStampThatIsNotOneIsRefusedNotReplaced() async throws {
        let out = try output("odd")
        #expect(FileManager.default.createFile(atPath: out.root + "/.runner-queue", contents: Data("hello\n".utf8)))
        do {
            try await QueueOutput.claim(out, queue: InMemoryQueueStore(), runner: "one")
            Issue.record("an unreadable stamp was accepted")
        } catch {
            #expect(error.usage && error.message.contains("not a queue's stamp"), "\(error)")
        }
        #expect(FileManager.default.contents(atPath: out.root + "/.runner-queue") == Data("hello\n".utf8))
    }
}
