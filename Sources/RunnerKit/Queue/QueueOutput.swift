import Foundation
import Glibc

/// The one output folder of a queue's fleet.
///
/// Every watcher of a queue writes into the same folder (a shared file system), so a key's
/// payload and record are the same whichever watcher ran it, and a key revalidates wherever it
/// runs next. The first watcher stamps its `--out` with the queue's id and a new folder id
/// (`.runner-queue`, made without replacing) and records the folder id in the queue; every
/// later watcher must find that same stamp in its `--out`, else it refuses to start, naming the
/// folder that is the queue's output. Two machines never keep two half copies.
package enum QueueOutput {
    /// The stamp's name in the output folder.
    package static let stampName = ".runner-queue"

    /// What a stamp says.
    struct Stamp: Equatable {
        var queue: String
        var folder: String

        init(queue: String, folder: String) {
            self.queue = queue
            self.folder = folder
        }

        init?(_ bytes: [UInt8]) {
            guard let json = try? JSONParser.parse(bytes), let queue = json["queue"]?.stringValue, let folder = json["folder"]?.stringValue
            else { return nil }
            self.init(queue: queue, folder: folder)
        }

        func json(runner: String) -> [UInt8] {
            var bytes: [UInt8] = []
            JSONWriter.write(
                .object([
                    ("queue", .string(queue)), ("folder", .string(folder)), ("stampedBy", .string(runner)),
                    ("stampedAt", .string(ISO8601DateFormatter().string(from: Date()))),
                ]), into: &bytes)
            bytes.append(0x0A)
            return bytes
        }
    }

    /// Makes `output` the queue's output, or checks that it is: stamps it if the queue has no
    /// output yet. Throws a usage error (one line, naming the folder) when it is not.
    package static func claim(_ output: OutputStore, queue: any QueueSharedOutput, runner: String) async throws(QueueError) {
        let identity = try await queue.identity()
        let folder = output.root
        var made = false
        var stamp: Stamp
        if let found = try read(in: folder) {
            stamp = found
        } else {
            if identity.folder != nil {
                throw QueueError("\(folder) holds no stamp of this queue: \(elsewhere(identity))", usage: true)
            }
            stamp = Stamp(queue: identity.id, folder: UUID().uuidString.lowercased())
            made = try write(stamp, in: folder, runner: runner)
            if !made, let found = try read(in: folder) { stamp = found }  // another watcher of this folder was first
        }
        guard stamp.queue == identity.id else {
            throw QueueError(
                "\(folder) is the output of another queue (its \(stampName) names queue \(stamp.queue)); "
                    + "give each queue its own output folder", usage: true)
        }
        let recorded = try await queue.recordOutput(folder: stamp.folder, path: folder, runner: runner)
        guard recorded.folder == stamp.folder else {
            if made { unlink(folder + "/" + stampName) }
            throw QueueError("\(folder) is not this queue's output: \(elsewhere(recorded))", usage: true)
        }
    }

    private static func elsewhere(_ identity: QueueIdentity) -> String {
        "its output is \(identity.output ?? "another folder")"
            + (identity.stampedBy.map { " (stamped by \($0))" } ?? "")
            + "; give every watcher of the queue that shared folder as --out"
    }

    /// The stamp in `folder` (nil: none). Throws when one is there and cannot be read.
    static func read(in folder: String) throws(QueueError) -> Stamp? {
        let path = folder + "/" + stampName
        guard let bytes = OutputStore.readFile(in: AT_FDCWD, path) else {
            guard errno == ENOENT else { throw QueueError("\(path) cannot be read: \(String(cString: strerror(errno)))", usage: true) }
            return nil
        }
        guard let stamp = Stamp(bytes) else { throw QueueError("\(path) is not a queue's stamp (remove it if nothing else wrote it)", usage: true) }
        return stamp
    }

    /// Writes `stamp` durably unless a stamp is there already; whether this call made it.
    static func write(_ stamp: Stamp, in folder: String, runner: String) throws(QueueError) -> Bool {
        let temporary = folder + "/.tmp-stamp-\(getpid())-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let target = folder + "/" + stampName
        do {
            try FileSystem.writeAtomically(stamp.json(runner: runner), to: temporary, mode: 0o644)
            do {
                try FileSystem.moveNoReplace(temporary, to: target)
            } catch {
                unlink(temporary)
                guard error.code == EEXIST else { throw error }
                return false
            }
            try Durability.syncFolder(folder)
            return true
        } catch {
            throw QueueError("\(folder) cannot be stamped as the queue's output: \(error)", usage: true)
        }
    }
}
