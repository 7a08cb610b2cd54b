module gj
go 1.24
