import Foundation
import Glibc

/// Reads folders of thousands of entries with names of every length through each function of the
/// engine that lists a folder, built with the address sanitizer (folder-reading.sh): a read past
/// the end of an entry that `readdir` returned near the end of its buffer is reported there and
/// fails the check. It also checks that every name comes back, once.
@main
struct FolderReadingCheck {
    static func main() throws {
        let root = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : NSTemporaryDirectory() + "folder-reading-\(getpid())"
        var generator = SystemRandomNumberGenerator()
        var checked = 0
        for round in 0..<6 {
            let results = "\(root)/\(round)/results"
            try FileManager.default.createDirectory(atPath: results, withIntermediateDirectories: true)
            var made = Set<String>()
            var temporaries = 0
            // Names of 1 to 250 bytes, a different mix each round, so that the entries that end
            // one buffer of readdir's land at every distance from its end.
            let count = 2_000 + round * 700
            for index in 0..<count {
                let length = round.isMultiple(of: 2) ? Int.random(in: 1...250, using: &generator) : 1 + (index * 37 + round) % 250
                var name = String(index) + "-"
                name += String(repeating: "x", count: max(0, length - name.count))
                if index.isMultiple(of: 5) {
                    // Temporary names of a process that is gone, a day old: the sweep removes them.
                    name = ".tmp-999999999." + name
                    temporaries += 1
                } else if index.isMultiple(of: 2) {
                    name += ".json"
                }
                name = String(name.prefix(250))
                guard FileManager.default.createFile(atPath: "\(results)/\(name)", contents: nil) else { throw Failed("could not create \(name)") }
                if name.hasPrefix(".tmp-") {
                    var times = [timespec(tv_sec: time(nil) - 200_000, tv_nsec: 0), timespec(tv_sec: time(nil) - 200_000, tv_nsec: 0)]
                    utimensat(AT_FDCWD, "\(results)/\(name)", &times, 0)
                }
                made.insert(name)
            }
            let listed = FileSystem.names(in: results)
            guard listed.count == made.count, Set(listed) == made else {
                throw Failed("FileSystem.names: \(listed.count) names, \(made.count) made, round \(round)")
            }
            let store = try OutputStore(root: "\(root)/\(round)")
            let records = store.recordFileNames()
            let expected = made.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }
            guard Set(records) == expected, records.count == expected.count else {
                throw Failed("OutputStore.recordFileNames: \(records.count) names, \(expected.count) expected, round \(round)")
            }
            let removed = Durability.sweepLeftovers(in: "\(root)/\(round)", depth: 1)
            guard removed == temporaries else { throw Failed("Durability.sweepLeftovers removed \(removed) of \(temporaries), round \(round)") }
            checked += made.count
        }
        try? FileManager.default.removeItem(atPath: root)
        print("folder reading: \(checked) entries in 6 folders read by FileSystem.names, OutputStore.recordFileNames and Durability.sweepLeftovers")
    }

    struct Failed: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
