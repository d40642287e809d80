import Foundation
import RunnerKinds
import RunnerKit

/// `--kinds DIR` (repeatable), else `$RUNNER_KINDS`: the folders of kind files a command reads.
enum KindOptions {
    static let option = CommandSpec.Option(
        name: "kinds", value: "DIR",
        help: "A folder of kind files (<name>.json); repeatable. (default: the folders of $RUNNER_KINDS, colon-separated)")

    /// The built-in kinds and those of the kind folders, or nil after printing the bad file (exit 2).
    static func registry(_ arguments: ParsedArguments) -> KindRegistry? {
        registry(given: arguments.allValues("kinds"))
    }

    /// The registry with the kind folders given (none: those of `$RUNNER_KINDS`).
    static func registry(given: [String]) -> KindRegistry? {
        let folders = KindFolders.folders(given: given, environment: ProcessInfo.processInfo.environment)
        switch KindFolders.registry(folders: folders) {
        case .success(let registry): return registry
        case .failure(let error):
            Console.error(error.description)
            return nil
        }
    }
}
