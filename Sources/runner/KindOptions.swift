import Foundation
import RunnerKinds
import RunnerKit

/// What every command that reads jobs takes: `--kinds DIR` (repeatable, else `$RUNNER_KINDS`)
/// and `--config FILE` (else `$RUNNER_CONFIG`), whose `kinds` add folders after those.
enum KindOptions {
    static let kinds = CommandOption<[String]>.list(
        "kinds", "DIR", help: "A folder of kind files (<name>.json); repeatable.",
        defaultText: "the folders of $RUNNER_KINDS, colon-separated")

    static let config = CommandOption<String?>.text(
        "config", "FILE", help: "A JSON file of request settings: userAgent, kinds, and per host headers, rate, perHost, limitRate, cacert, cert, key.",
        defaultText: "$\(RequestConfig.environmentVariable)")

    /// The options of every command that reads or runs jobs.
    static let options = [kinds.spec, config.spec]

    /// The kinds a command knows and the config's request settings.
    struct Setup {
        var registry: KindRegistry
        var requests: RequestConfig
    }

    /// The setup the arguments give, or nil after printing the bad file in one line (exit 2).
    static func setup(_ arguments: ParsedArguments, checkingSecrets: Bool = true) -> Setup? {
        setup(kinds: arguments.allValues(kinds.spec.name), config: arguments.value(config.spec.name), checkingSecrets: checkingSecrets)
    }

    /// The built-in kinds and those of the kind folders (none given: those of `$RUNNER_KINDS`),
    /// then those of the config file (none given: `$RUNNER_CONFIG`'s, if set).
    /// `checkingSecrets` false: the config's references are read but not expanded (`submit`).
    static func setup(kinds: [String], config: String?, checkingSecrets: Bool = true) -> Setup? {
        let environment = ProcessInfo.processInfo.environment
        var requests = RequestConfig()
        if let path = config ?? environment[RequestConfig.environmentVariable].flatMap({ $0.isEmpty ? nil : $0 }) {
            do {
                requests = try RequestConfig(contentsOf: path, environment: environment, checkingSecrets: checkingSecrets)
            } catch {
                Console.error(error.description)
                return nil
            }
        }
        let folders = KindFolders.folders(given: kinds, environment: environment) + requests.kinds
        do {
            return Setup(registry: try KindFolders.registry(folders: folders), requests: requests)
        } catch {
            Console.error(error.description)
            return nil
        }
    }

    /// The registry alone, for commands that do not make requests.
    static func registry(_ arguments: ParsedArguments, checkingSecrets: Bool = true) -> KindRegistry? {
        setup(arguments, checkingSecrets: checkingSecrets)?.registry
    }
}
