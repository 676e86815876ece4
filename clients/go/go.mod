module electd

go 1.19
