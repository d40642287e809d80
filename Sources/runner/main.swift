import Foundation

setvbuf(stdout, nil, _IOLBF, 0)
exit(await Runner.main(Array(CommandLine.arguments.dropFirst())))
