import Foundation

exit(await Runner.main(Array(CommandLine.arguments.dropFirst())))
