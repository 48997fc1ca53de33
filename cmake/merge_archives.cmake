# cmake -DAR=ar -DOUTPUT=libx.a "-DINPUTS=liba.a|libb.a" -P merge_archives.cmake
# One static archive holding every member of INPUTS (GNU ar's MRI script: ADDLIB copies an
# archive's members as they are, so same-named objects of different libraries both survive).
string(REPLACE "|" ";" INPUTS "${INPUTS}")
file(REMOVE "${OUTPUT}")
set(script "CREATE ${OUTPUT}\n")
foreach(input IN LISTS INPUTS)
  string(APPEND script "ADDLIB ${input}\n")
endforeach()
string(APPEND script "SAVE\nEND\n")
file(WRITE "${OUTPUT}.mri" "${script}")
execute_process(COMMAND "${AR}" -M INPUT_FILE "${OUTPUT}.mri" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${AR} -M failed (${status}) building ${OUTPUT}")
endif()
